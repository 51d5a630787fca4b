import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target, type Received } from "../helpers/target.ts";
import type { Runtime } from "../../src/runtime.ts";
import { expectError, ms, mustSchedule, UTC_ISO } from "./support.ts";

const nominalOf = (c: Received) => c.headers["scheduler-nominal-time"];

for (const driver of DRIVERS) {
  describe(`schedules firing through a running scheduler (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    let target: Target;

    beforeAll(async () => {
      tdb = await freshDb(driver);
      target = new Target((r) => (r.path === "/gone" ? new Response("gone", { status: 410 }) : new Response("ok")));
      rt = await startScheduler(tdb.db, { SCHEDULER_ALLOW_PRIVATE_TARGETS: "1" }, { mode: "all" });
    });
    afterAll(async () => {
      await rt?.stop();
      target?.stop();
      await tdb?.close();
    });

    const job = async (id: string) => (await api(rt, "GET", `/v1/jobs/${id}`)).body;
    const schedule = async (id: string) => (await api(rt, "GET", `/v1/schedules/${id}`)).body;

    test("trigger: the target gets the job with Idempotency-Key <id>@<nominal>, Scheduler-Nominal-Time and webhook-id", async () => {
      const s = await mustSchedule(rt, { id: "manual", cron: "0 0 1 1 *", target: { url: `${target.url}/trig` } });
      const r = await api(rt, "POST", `/v1/schedules/${s.id}/trigger`, { reason: "by hand" });
      expect(r.status).toBe(201);
      const j = r.body;
      expect(j.schedule_id).toBe("manual");
      expect(Math.abs(ms(j.nominal_time) - Date.now())).toBeLessThan(2000);
      expect(j.idempotency_key).toBe(`manual@${j.nominal_time}`);
      await eventually(() => target.callsTo("/trig").length >= 1, 5000, "the triggered call");
      const calls = target.callsTo("/trig");
      expect(calls.length).toBe(1);
      const h = calls[0].headers;
      expect(h["webhook-id"]).toBe(j.id);
      expect(h["idempotency-key"]).toBe(`manual@${j.nominal_time}`);
      expect(h["scheduler-nominal-time"]).toMatch(UTC_ISO);
      expect(ms(h["scheduler-nominal-time"])).toBe(ms(j.nominal_time));
      expect(h["idempotency-key"]).toBe(`manual@${h["scheduler-nominal-time"]}`);
      expect(h["scheduler-catchup"]).toBeUndefined();
      await eventually(async () => (await job(j.id)).status === "succeeded", 5000, "the triggered job to succeed");
      // A manual run does not move the rule.
      expect((await schedule("manual")).next_fire_at).toBe(s.next_fire_at);
    });

    test("every second: ≥ 3 on-time calls 1 s apart, listed as jobs and counted; pause stops them; delete", async () => {
      const created = Date.now();
      const s = await mustSchedule(rt, { id: "tick", cron: "* * * * * *", target: { url: `${target.url}/tick` } });
      expect(s.dst).toEqual({ gap: "skip", fold: "both" });
      expect(ms(s.next_fire_at)).toBeGreaterThan(created - 1);
      expect(ms(s.next_fire_at) % 1000).toBe(0);
      await eventually(() => target.callsTo("/tick").length >= 3, 4000, "3 calls within ~3.5 s of creating an every-second schedule");
      const calls = target.callsTo("/tick").slice(0, 3);
      const nominals = calls.map(nominalOf);
      for (const [i, c] of calls.entries()) {
        const n = nominals[i];
        expect(n).toMatch(UTC_ISO);
        expect(ms(n) % 1000).toBe(0);
        expect(ms(n)).toBeGreaterThan(created - 1);
        // Never early: it arrives at or after its nominal time.
        expect(c.at).toBeGreaterThanOrEqual(ms(n));
        expect(c.headers["idempotency-key"]).toBe(`tick@${n}`);
        expect(c.headers["scheduler-catchup"]).toBeUndefined();
        // window 0: due at the nominal time.
        expect(ms(c.headers["scheduler-scheduled-for"])).toBe(ms(n));
      }
      expect(new Set(nominals).size).toBe(3);
      expect(ms(nominals[1]) - ms(nominals[0])).toBe(1000);
      expect(ms(nominals[2]) - ms(nominals[1])).toBe(1000);
      expect(ms(nominals[0])).toBe(ms(s.next_fire_at));
      expect(new Set(calls.map((c) => c.headers["webhook-id"])).size).toBe(3);

      // GET /v1/jobs?schedule_id lists them, with the same nominal times and keys.
      const listed = await api(rt, "GET", "/v1/jobs?schedule_id=tick&limit=1000");
      expect(listed.status).toBe(200);
      const byId = new Map((listed.body.items as any[]).map((j) => [j.id, j]));
      for (const c of calls) {
        const j = byId.get(c.headers["webhook-id"]);
        expect(j).toBeDefined();
        expect(j).toMatchObject({ schedule_id: "tick", idempotency_key: `tick@${nominalOf(c)}`, catchup: false });
        expect(ms(j.nominal_time)).toBe(ms(nominalOf(c)));
      }
      for (const j of listed.body.items) expect(j.schedule_id).toBe("tick");
      const g = await schedule("tick");
      expect(g.occurrences.generated).toBeGreaterThanOrEqual(3);
      expect(g.occurrences.generated).toBeGreaterThanOrEqual(target.callsTo("/tick").length);
      expect(g.occurrences.generated).toBeLessThanOrEqual(listed.body.items.length + 1);
      expect(ms(g.last_nominal_at)).toBeGreaterThanOrEqual(ms(nominals[2]));
      expect(ms(g.next_fire_at)).toBeGreaterThan(ms(g.last_nominal_at));

      // Pause: nothing whose nominal time is after the pause runs.
      const p = await api(rt, "POST", "/v1/schedules/tick/pause", { reason: "quiet, please" });
      const pausedAt = Date.now();
      expect(p.status).toBe(200);
      expect(p.body).toMatchObject({ paused: true, paused_reason: "quiet, please" });
      // Anything generated just before the pause finishes first.
      await eventually(
        async () => {
          const items = (await api(rt, "GET", "/v1/jobs?schedule_id=tick&limit=1000")).body.items as any[];
          return items.every((j) => !["scheduled", "queued", "running"].includes(j.status));
        },
        3000,
        "the occurrences generated before the pause to finish",
      );
      const settled = target.callsTo("/tick").length;
      await Bun.sleep(2000);
      const all = target.callsTo("/tick");
      expect(all.length).toBe(settled);
      for (const c of all) expect(ms(nominalOf(c))).toBeLessThanOrEqual(pausedAt);
      const after = await schedule("tick");
      expect(after.paused).toBe(true);
      expect(after.occurrences.generated).toBe(p.body.occurrences.generated);

      const d = await api(rt, "DELETE", "/v1/schedules/tick");
      expect(d.status).toBe(200);
      expect(d.body.deleted).toBe(true);
      expectError(await api(rt, "GET", "/v1/schedules/tick"), 404);
      // Its jobs stay readable, finished.
      for (const c of all) expect((await job(c.headers["webhook-id"])).status).toBe("succeeded");
    });

    test("410 Gone: the schedule ends paused with a reason naming 410, its job dead, and no more calls", async () => {
      const s = await mustSchedule(rt, { id: "retired", cron: "* * * * * *", target: { url: `${target.url}/gone` }, retry: { max_attempts: 5 } });
      await eventually(() => target.callsTo("/gone").length >= 1, 4000, "the first call to the retired target");
      const paused = await eventually(
        async () => {
          const g = await schedule(s.id);
          return g.paused ? g : null;
        },
        5000,
        "the schedule to be paused after 410",
      );
      expect(paused.paused_reason).toMatch(/410/);
      expect(paused.version).toBeGreaterThan(1);
      const first = target.callsTo("/gone")[0];
      const j = await eventually(
        async () => {
          const x = await job(first.headers["webhook-id"]);
          return x.status === "dead" ? x : null;
        },
        3000,
        "the 410'd job to be dead",
      );
      expect(j.schedule_id).toBe("retired");
      expect(j.attempts).toBe(1);
      expect(j.attempt_log.map((a: any) => a.http_status)).toEqual([410]);
      const n = target.callsTo("/gone").length;
      await Bun.sleep(1500);
      expect(target.callsTo("/gone").length).toBe(n);
      // overlap=skip: nothing else ran while the first was in flight, so one call in all.
      expect(n).toBe(1);
      const later = await schedule(s.id);
      expect(later).toMatchObject({ paused: true, paused_reason: paused.paused_reason });
      // Resuming is up to a person: a resume clears the reason.
      const r = await api(rt, "POST", `/v1/schedules/${s.id}/resume`, {});
      expect(r.body).toMatchObject({ paused: false, paused_reason: null });
      await api(rt, "DELETE", `/v1/schedules/${s.id}`);
    });

    test("/metrics counts generated occurrences", async () => {
      const nominals = new Set(target.calls.filter((c) => c.path === "/tick" || c.path === "/gone").map((c) => `${c.path}${nominalOf(c)}`));
      expect(nominals.size).toBeGreaterThanOrEqual(1);
      const res = await fetch(`${rt.url}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      const m = /^scheduler_occurrences_total\{result="generated"\} (\d+(?:\.\d+)?)$/m.exec(text);
      expect(m).not.toBeNull();
      const generated = Number(m![1]);
      expect(generated).toBeGreaterThan(0);
      // Triggers are not occurrences of the rule, but every delivered rule occurrence is counted.
      expect(generated).toBeGreaterThanOrEqual(nominals.size);
    });
  });
}
