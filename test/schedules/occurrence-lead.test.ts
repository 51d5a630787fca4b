/**
 * Occurrences made ahead of their instant (SCHEDULER_OCCURRENCE_LEAD, migration 031).
 *
 * A 9:00 herd of schedules went only as fast as its occurrences were made at 9:00 (bench/README
 * part 24). With a lead, a schedule's next occurrence is made that far ahead: a job due at its
 * nominal time like any other, so never called early. What must hold:
 *   - one occurrence ahead at a time, due at its nominal time; the API still shows it as the
 *     next fire until it comes;
 *   - overlap skip and queue cannot know ahead what will be in progress at the instant: made
 *     ahead only when nothing is in progress now, otherwise declined (the instant decides),
 *     and a declined schedule is not picked again before its instant;
 *   - any change to the schedule (pause, PATCH, DELETE), and under skip or queue a manual run
 *     or a replay, takes the occurrence back first: the change applies as if it had not been
 *     made. A manual run racing a pass that is making it waits for that pass, then takes it back.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { scheduleView } from "../../src/api/schedule-view.ts";
import { ScheduleGenerator } from "../../src/dispatcher/schedule-generator.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import type { Runtime } from "../../src/runtime.ts";
import type { Db } from "../../src/store/db.ts";
import { getSchedule as readSchedule, insertSchedule, nextFireAt, type ScheduleFields, type ScheduleRow } from "../../src/store/schedules.ts";
import { DRIVERS, describeDb } from "../helpers/db.ts";
import { pausedBefore } from "../helpers/paused-db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { takeShards } from "../helpers/shards.ts";
import { eventually } from "../helpers/target.ts";
import { dbJobs, getSchedule, Recorder, scheduleFields } from "./gen-support.ts";

const by = { actor: "test", reason: null };
const LEAD_MS = 5000;
/** Once a year: the rule's next instant after a test's is never inside the lead. */
const YEARLY = "0 0 0 1 1 *";

const dbNow = async (db: Db) => (await db.query<{ now: Date }>("SELECT now() AS now"))[0]!.now.getTime();

/** One generation pass with a lead, as a dispatcher's leader runs it. */
async function pass(db: Db, leadMs = LEAD_MS): Promise<number> {
  const generator = new ScheduleGenerator({ db, batch: 100, catchupPerSecond: 1000, leadMs, log: silentLogger, metrics: new Metrics() });
  return generator.runOnce(await takeShards(db, "lead"));
}

/** A schedule whose next fire is `inMs` from the database's now (whole milliseconds). */
async function scheduleIn(db: Db, id: string, inMs: number, over: Partial<ScheduleFields> = {}): Promise<number> {
  return scheduleAt(db, id, (await dbNow(db)) + inMs, over);
}

async function scheduleAt(db: Db, id: string, at: number, over: Partial<ScheduleFields> = {}): Promise<number> {
  await insertSchedule(db, scheduleFields(id, { cron: YEARLY, next_fire_at: new Date(at), misfire: "skip", ...over }), by);
  return at;
}

const row = async (db: Db, id: string): Promise<ScheduleRow> => (await readSchedule(db, "default", id))!;

/** A job of the schedule in the given state, as an earlier occurrence would be. */
async function occurrenceIn(db: Db, scheduleId: string, status: string, dueAt = "now() - interval '1 minute'"): Promise<string> {
  const [r] = await db.query<{ id: string }>(
    `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms,
                       schedule_id, nominal_time, idempotency_key, finished_at, dead_reason)
     VALUES (gen_random_uuid(), 'default', $2, ${dueAt}, now() - interval '1 minute',
             '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}', 3, 1000, 60000, 5000,
             $1, now() - interval '1 minute', $1 || '@earlier-' || $2,
             CASE WHEN $2 = 'dead' THEN now() END, CASE WHEN $2 = 'dead' THEN 'permanent' END)
     RETURNING id`,
    [scheduleId, status],
  );
  return r!.id;
}

/** The schedule's jobs whose nominal time is still to come: made ahead. */
const futureJobs = async (db: Db, id: string) => (await dbJobs(db, id)).filter((j) => j.nominal > Date.now());

for (const driver of DRIVERS) {
  describe(`occurrences made ahead of their instant (${driver})`, () => {
    const d = describeDb(driver);

    test("made within the lead, due at its nominal time, one at a time; the API still shows it as the next fire", async () => {
      const t = await scheduleIn(d.db, "ahead-allow", 2500, { overlap: "allow" });
      const far = await scheduleIn(d.db, "ahead-far", LEAD_MS + 4000, { overlap: "allow" });
      expect(await pass(d.db, 0)).toBe(0);
      expect(await pass(d.db)).toBe(1);

      const [job, ...more] = await dbJobs(d.db, "ahead-allow");
      expect(more).toEqual([]);
      expect(job!.status).toBe("scheduled");
      expect(job!.nominal).toBe(t);
      expect(job!.due).toBe(t);
      expect(job!.created).toBeLessThan(t - 1000);
      expect(job!.idempotency_key).toBe(`ahead-allow@${new Date(t).toISOString()}`);
      expect(await dbJobs(d.db, "ahead-far")).toEqual([]);

      const s = await row(d.db, "ahead-allow");
      expect(s.next_fire_at!.getTime()).toBeGreaterThan(t + 86_400_000);
      expect(s.staged_fire_at!.getTime()).toBe(t);
      expect(s.occurrences_generated).toBe(1);
      expect(scheduleView(s, null).next_fire_at).toBe(new Date(t).toISOString());
      // Nothing more to make ahead: the next pass finds nothing, the gate names the far one.
      expect(await pass(d.db)).toBe(0);
      expect((await nextFireAt(d.db, LEAD_MS)).at!.getTime()).toBe(far - LEAD_MS);
      expect((await nextFireAt(d.db)).at!.getTime()).toBe(far);
      await Bun.sleep(Math.max(0, t - Date.now() + 50));
      // Its instant passed: the view shows the rule's next.
      expect(scheduleView(await row(d.db, "ahead-allow"), null).next_fire_at).toBe(s.next_fire_at!.toISOString());
      await d.db.query("DELETE FROM schedules WHERE id = 'ahead-far'");
    });

    test("skip or queue with an occurrence in progress: declined, not picked again, decided at the instant", async () => {
      const t = await scheduleIn(d.db, "ahead-busy-skip", 1500, { overlap: "skip" });
      await scheduleAt(d.db, "ahead-busy-queue", t, { overlap: "queue" });
      await scheduleAt(d.db, "ahead-idle-skip", t, { overlap: "skip" });
      await occurrenceIn(d.db, "ahead-idle-skip", "dead");
      const running = await occurrenceIn(d.db, "ahead-busy-skip", "running");
      await occurrenceIn(d.db, "ahead-busy-queue", "scheduled");

      expect(await pass(d.db)).toBe(3);
      // Nothing in progress: made ahead under skip too.
      expect((await futureJobs(d.db, "ahead-idle-skip")).map((j) => j.nominal)).toEqual([t]);
      for (const id of ["ahead-busy-skip", "ahead-busy-queue"]) {
        expect((await dbJobs(d.db, id)).length).toBe(1);
        const s = await row(d.db, id);
        expect(s.next_fire_at!.getTime()).toBe(t);
        expect(s.ahead_checked_at!.getTime()).toBe(t);
        expect(s.occurrences_skipped).toBe(0);
        expect(s.staged_fire_at ?? null).toBeNull();
      }
      // Declined for this instant: no pass looks at them again before it, and the gate waits for it.
      expect(await pass(d.db)).toBe(0);
      expect((await nextFireAt(d.db, LEAD_MS)).at!.getTime()).toBe(t);

      // The running one ends before the instant: at the instant the occurrence is made.
      await d.db.query("UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = $1", [running]);
      await Bun.sleep(Math.max(0, t - Date.now() + 50));
      expect(await pass(d.db)).toBe(2);
      const made = (await dbJobs(d.db, "ahead-busy-skip")).filter((j) => j.nominal === t);
      expect(made.length).toBe(1);
      expect(made[0]!.created).toBeGreaterThanOrEqual(t);
      // Queue: one in progress at the instant, so held behind it.
      const held = (await dbJobs(d.db, "ahead-busy-queue")).filter((j) => j.nominal === t);
      expect(held.length).toBe(1);
      expect(held[0]!.due).toBeNull();
    });

    describe("a change takes the occurrence back", () => {
      let rt: Runtime;
      beforeAll(async () => {
        rt = await startScheduler(d.db, {}, { mode: "api" });
      });
      afterAll(async () => {
        await rt?.stop();
      });
      const setUp = async (id: string, overlap: "allow" | "skip" = "skip") => {
        const t = await scheduleIn(d.db, id, 3000, { overlap });
        expect(await pass(d.db)).toBeGreaterThanOrEqual(1);
        expect((await futureJobs(d.db, id)).map((j) => j.nominal)).toEqual([t]);
        expect((await getSchedule(rt, id)).next_fire_at).toBe(new Date(t).toISOString());
        return t;
      };
      /** The occurrence is gone (deleted, not cancelled) and the schedule is back on it. */
      const takenBack = async (id: string, t: number) => {
        expect(await futureJobs(d.db, id)).toEqual([]);
        const s = await row(d.db, id);
        expect(s.next_fire_at!.getTime()).toBe(t);
        expect(s.staged_fire_at ?? null).toBeNull();
        expect(s.occurrences_generated).toBe(0);
      };

      test("pause: taken back; resumed, made ahead again", async () => {
        const t = await setUp("back-pause");
        expect((await api(rt, "POST", "/v1/schedules/back-pause/pause", {})).status).toBe(200);
        await takenBack("back-pause", t);
        // The audit of the change says which occurrence it took back.
        const audit = await api(rt, "GET", "/v1/audit?action=schedule.paused&object_id=back-pause");
        expect(audit.status).toBe(200);
        expect(audit.body.items.map((a: any) => a.details)).toEqual([{ version: 2, occurrence_taken_back: new Date(t).toISOString() }]);
        expect(await pass(d.db)).toBe(0);
        expect((await api(rt, "POST", "/v1/schedules/back-pause/resume", {})).status).toBe(200);
        expect(await pass(d.db)).toBe(1);
        expect((await futureJobs(d.db, "back-pause")).map((j) => j.nominal)).toEqual([t]);
      });

      test("PATCH: taken back, made again with the new target", async () => {
        const t = await setUp("back-patch");
        const res = await api(rt, "PATCH", "/v1/schedules/back-patch", { target: { url: "http://127.0.0.1:9/patched" } });
        expect(res.status).toBe(200);
        expect(res.body.next_fire_at).toBe(new Date(t).toISOString());
        await takenBack("back-patch", t);
        expect(await pass(d.db)).toBe(1);
        const [job] = await d.db.query<{ url: string }>("SELECT target->>'url' AS url FROM jobs WHERE schedule_id = 'back-patch'");
        expect(job!.url).toBe("http://127.0.0.1:9/patched");
      });

      test("DELETE: the occurrence made ahead is removed, not counted as cancelled", async () => {
        await setUp("back-delete");
        const res = await api(rt, "DELETE", "/v1/schedules/back-delete");
        expect(res.status).toBe(200);
        expect(res.body.cancelled_occurrences).toBe(0);
        expect(await dbJobs(d.db, "back-delete")).toEqual([]);
      });

      test("a manual run under skip: taken back (the run is in progress at the instant); under allow: kept", async () => {
        const t = await setUp("back-run-skip");
        expect((await api(rt, "POST", "/v1/schedules/back-run-skip/trigger", {})).status).toBe(201);
        await takenBack("back-run-skip", t);
        // The run is in progress: making ahead is declined, the instant decides.
        expect(await pass(d.db)).toBe(1);
        expect((await row(d.db, "back-run-skip")).ahead_checked_at!.getTime()).toBe(t);

        const u = await setUp("back-run-allow", "allow");
        expect((await api(rt, "POST", "/v1/schedules/back-run-allow/trigger", {})).status).toBe(201);
        expect((await futureJobs(d.db, "back-run-allow")).map((j) => j.nominal)).toEqual([u]);
        expect((await row(d.db, "back-run-allow")).staged_fire_at!.getTime()).toBe(u);
      });

      test("one already claimed ahead (SCHEDULER_PRESTAGE) stays with its worker, still shown as the next fire", async () => {
        const t = await setUp("back-claimed");
        // As a prestaging claim leaves it: running, not yet called.
        await d.db.query(
          "UPDATE jobs SET status = 'running', lease_owner = 'w', lease_until = now() + interval '30 seconds' WHERE schedule_id = 'back-claimed'",
        );
        const res = await api(rt, "POST", "/v1/schedules/back-claimed/pause", {});
        expect(res.status).toBe(200);
        const audit = await api(rt, "GET", "/v1/audit?action=schedule.paused&object_id=back-claimed");
        expect(audit.body.items.map((a: any) => a.details)).toEqual([{ version: 2 }]);
        expect(res.body.next_fire_at).toBe(new Date(t).toISOString());
        expect((await futureJobs(d.db, "back-claimed")).map((j) => [j.nominal, j.status])).toEqual([[t, "running"]]);
        const s = await row(d.db, "back-claimed");
        expect(s.next_fire_at!.getTime()).toBeGreaterThan(t);
        expect(s.occurrences_generated).toBe(1);
      });

      test("a replay of one of its dead occurrences under skip: taken back", async () => {
        const t = await setUp("back-replay");
        const id = await occurrenceIn(d.db, "back-replay", "dead");
        const res = await api(rt, "POST", `/v1/dlq/${id}/replay`, { reason: "test" });
        expect(res.status).toBe(200);
        await takenBack("back-replay", t);
      });
    });
  });
}

describe("a manual run racing the pass that makes its schedule's occurrence ahead (postgres)", () => {
  const d = describeDb("postgres");

  test("the run waits for the pass to commit, then takes the occurrence back", async () => {
    const rt = await startScheduler(d.db, {}, { mode: "api" });
    try {
      const t = await scheduleIn(d.db, "race-run", 3000, { overlap: "skip" });
      let reached!: () => void;
      const atAdvance = new Promise<void>((r) => (reached = r));
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      // The pass stops after its insert, holding the schedule's lock, before it moves the schedule on.
      const passing = pass(pausedBefore(d.db, "AdvanceSchedule", reached, gate));
      await atAdvance;
      let answered = false;
      const run = api(rt, "POST", "/v1/schedules/race-run/trigger", {}).finally(() => (answered = true));
      await Bun.sleep(300);
      expect(answered).toBe(false);
      release();
      expect(await passing).toBe(1);
      expect((await run).status).toBe(201);
      expect(await futureJobs(d.db, "race-run")).toEqual([]);
      const s = await row(d.db, "race-run");
      expect(s.next_fire_at!.getTime()).toBe(t);
      expect(s.staged_fire_at ?? null).toBeNull();
      expect((await dbJobs(d.db, "race-run")).length).toBe(1); // the manual run's
    } finally {
      await rt.stop();
    }
  });
});

describe("through a running scheduler with SCHEDULER_OCCURRENCE_LEAD=3s (postgres)", () => {
  const d = describeDb("postgres");

  test("the occurrence exists seconds before its instant and is called once, at it, never before", async () => {
    const rec = new Recorder();
    const rt = await startScheduler(d.db, { SCHEDULER_OCCURRENCE_LEAD: "3s", SCHEDULER_CLOCK_SKEW: "100ms" });
    try {
      const t = Math.ceil((Date.now() + 6000) / 1000) * 1000;
      const at = new Date(t);
      const cron = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`;
      const created = await api(rt, "POST", "/v1/schedules", { id: "lead-flow", cron, timezone: "UTC", overlap: "skip", target: { url: `${rec.url}/lead` } });
      expect(created.status).toBe(201);
      expect(created.body.next_fire_at).toBe(at.toISOString());
      await eventually(async () => (await dbJobs(d.db, "lead-flow")).length === 1, 8000, "the occurrence made ahead");
      const [job] = await dbJobs(d.db, "lead-flow");
      expect(job!.created).toBeLessThan(t - 2000);
      expect(Date.now()).toBeLessThan(t);
      expect((await getSchedule(rt, "lead-flow")).next_fire_at).toBe(at.toISOString());
      await eventually(async () => rec.calls("/lead").length === 1, 10_000, "the call");
      const [call] = rec.calls("/lead");
      expect(call!.at).toBeGreaterThanOrEqual(t);
      expect(call!.at).toBeLessThan(t + 1000);
      expect(Date.parse(call!.headers["scheduler-nominal-time"]!)).toBe(t);
      await Bun.sleep(500);
      expect(rec.calls("/lead").length).toBe(1);
      const after = await getSchedule(rt, "lead-flow");
      expect(Date.parse(after.next_fire_at)).toBeGreaterThan(t + 86_400_000);
    } finally {
      await rt.stop();
      rec.stop();
    }
  }, 30_000);
});
