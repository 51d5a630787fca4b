// Replays through a whole scheduler (API, dispatcher, worker in one process) against real
// loopback targets: the replayed job keeps its id and gets new attempts, a fresh set of tries,
// quarantine after identical deaths, and bulk replays that really call at their rate.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";
import type { Runtime } from "../../src/runtime.ts";
import { row } from "./support.ts";

for (const driver of DRIVERS) {
  describe(`dead-letter replay, delivered (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    let target: Target;
    // Answers by path: a list of statuses for the 1st, 2nd, … call to that path (the last repeats).
    const plans = new Map<string, number[]>();

    beforeAll(async () => {
      t = await freshDb(driver);
      target = new Target((r, n) => {
        const plan = plans.get(r.path) ?? [200];
        return new Response("x", { status: plan[Math.min(n, plan.length) - 1] });
      });
      // No tokens: loopback clients get every scope (the actor is "local").
      rt = await startScheduler(t.db, { SCHEDULER_CATCHUP_RATE: "50" });
    });
    afterAll(async () => {
      await rt?.stop();
      target?.stop();
      await t?.close();
    });

    const create = async (path: string, extra: Record<string, unknown> = {}) => {
      const r = await api(rt, "POST", "/v1/jobs", { target: { url: target.url + path }, retry: { max_attempts: 2, base: "10ms", max: "20ms" }, ...extra });
      expect(r.status).toBe(201);
      return r.body.id as string;
    };
    const statusIs = (id: string, status: string) => eventually(async () => (await row(t.db, id)).status === status, 10_000, `job ${id} ${status}`);
    const dlqItem = async (id: string) => {
      const r = await api(rt, "GET", "/v1/dlq?limit=1000");
      return (r.body.items as any[]).find((j) => j.id === id);
    };

    test("a replay keeps the job id, gives it a full set of tries, and its calls get new attempt ids (Scheduler-Attempt counts on)", async () => {
      // 500, 500: dead after max_attempts = 2. Replayed: 500 then 200 — only a reset budget lets
      // the second call happen.
      plans.set("/once", [500, 500, 500, 200]);
      const id = await create("/once");
      await statusIs(id, "dead");
      const dead = await dlqItem(id);
      expect(dead).toMatchObject({ reason: "max_attempts", failure_signature: "max_attempts:500", attempts: 2, replays: 0, quarantined: false });
      const before = (await api(rt, "GET", `/v1/jobs/${id}`)).body.attempt_log.map((a: any) => a.attempt_id);
      expect(before).toHaveLength(2);

      const r = await api(rt, "POST", `/v1/dlq/${id}/replay`, { reason: "endpoint fixed" });
      expect(r.status).toBe(200);
      expect(r.body.id).toBe(id);
      await statusIs(id, "succeeded");
      const job = (await api(rt, "GET", `/v1/jobs/${id}`)).body;
      expect(job).toMatchObject({ id, status: "succeeded", attempts: 4, replays: 1 });
      const ids = job.attempt_log.map((a: any) => a.attempt_id);
      expect(ids.slice(0, 2)).toEqual(before);
      expect(new Set(ids).size).toBe(4);
      expect(job.attempt_log.map((a: any) => [a.number, a.http_status])).toEqual([
        [1, 500],
        [2, 500],
        [3, 500],
        [4, 200],
      ]);
      const calls = target.callsTo("/once");
      expect(calls.map((c) => c.headers["scheduler-attempt"])).toEqual(["1", "2", "3", "4"]);
      expect(calls.map((c) => c.headers["webhook-id"])).toEqual([id, id, id, id]);
      expect(calls.slice(2).map((c) => c.headers["scheduler-attempt-id"])).toEqual(ids.slice(2));
      // A replay is not a misfire-policy run.
      for (const c of calls) expect(c.headers["scheduler-catchup"]).toBeUndefined();
      const audit = await t.db.query<any>("SELECT actor, reason FROM audit_log WHERE action = 'dlq.replayed' AND object_id = $1", [id]);
      expect(audit).toEqual([{ actor: "local", reason: "endpoint fixed" }]);
    });

    test("a job that dies the same way after 3 replays is quarantined: replay is 409 until forced; a different failure starts the count again", async () => {
      plans.set("/poison", [400]);
      const id = await create("/poison");
      await statusIs(id, "dead");
      for (let i = 1; i <= 3; i++) {
        const r = await api(rt, "POST", `/v1/dlq/${id}/replay`, { reason: `try ${i}` });
        expect(r.status).toBe(200);
        await eventually(
          async () => {
            const j = await row(t.db, id);
            return j.status === "dead" && j.replays === i;
          },
          10_000,
          `death ${i + 1}`,
        );
      }
      expect(await dlqItem(id)).toMatchObject({
        reason: "permanent",
        failure_signature: "permanent:400",
        same_failure_count: 4,
        replays: 3,
        quarantined: true,
      });
      const refused = await api(rt, "POST", `/v1/dlq/${id}/replay`, { reason: "again" });
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe("quarantined");
      expect(target.callsTo("/poison")).toHaveLength(4);
      const bulk = await api(rt, "POST", "/v1/dlq/replay", { filter: { reason: "permanent:400" }, reason: "all of them" });
      expect(bulk.body.job_ids).not.toContain(id);
      expect(bulk.body.skipped).toContainEqual(expect.objectContaining({ id, code: "quarantined" }));
      const forced = await api(rt, "POST", `/v1/dlq/${id}/replay`, { reason: "forced", force: true });
      expect(forced.status).toBe(200);
      await eventually(async () => (await row(t.db, id)).replays === 4 && (await row(t.db, id)).status === "dead", 10_000, "forced run");
      expect(target.callsTo("/poison")).toHaveLength(5);
      expect((await dlqItem(id)).quarantined).toBe(true);

      // 400, then 404: two different ways to die, no quarantine count carried over.
      plans.set("/shifty", [400, 404]);
      const other = await create("/shifty");
      await statusIs(other, "dead");
      expect((await api(rt, "POST", `/v1/dlq/${other}/replay`, { reason: "retry" })).status).toBe(200);
      await eventually(async () => (await row(t.db, other)).replays === 1 && (await row(t.db, other)).status === "dead", 10_000, "second death");
      expect(await dlqItem(other)).toMatchObject({ failure_signature: "permanent:404", same_failure_count: 1, quarantined: false });
    });

    test("bulk replay at 5/s: due_at 200 ms apart, the last call ≥ 1.8 s after the first due instant, none early", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        plans.set(`/rate/${i}`, [400, 200]);
        ids.push(await create(`/rate/${i}`, { tenant: "rate" }));
      }
      await eventually(
        async () => Number((await t.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE tenant = 'rate' AND status = 'dead'"))[0].n) === 10,
        10_000,
        "10 dead",
      );
      const r = await api(rt, "POST", "/v1/dlq/replay", { filter: { tenant: "rate" }, rate_per_sec: 5, reason: "downstream fixed" });
      expect(r.status).toBe(200);
      expect(r.body.count).toBe(10);
      expect(new Date(r.body.last_due_at).getTime() - new Date(r.body.first_due_at).getTime()).toBe(1800);
      const dues = new Map(
        (await t.db.query<{ id: string; due_at: Date }>("SELECT id, due_at FROM jobs WHERE tenant = 'rate'")).map((x) => [x.id, x.due_at.getTime()]),
      );
      const sorted = [...dues.values()].sort((a, b) => a - b);
      for (let i = 1; i < sorted.length; i++) expect(Math.abs(sorted[i] - sorted[i - 1] - 200)).toBeLessThanOrEqual(1);

      await eventually(async () => ids.every((_, i) => target.callsTo(`/rate/${i}`).length === 2), 15_000, "10 replayed calls");
      const replayCalls = ids.map((id, i) => ({ id, at: target.callsTo(`/rate/${i}`)[1].at }));
      const times = replayCalls.map((c) => c.at).sort((a, b) => a - b);
      // The pacing is real: the last call came at least the 1.8 s of paced due instants after
      // the first due instant (measured from the first due instant, not the first call, which
      // a loaded machine may make late and so shorten the spread of the calls).
      expect(times[times.length - 1] - sorted[0]!).toBeGreaterThanOrEqual(1800 - 5);
      // ... and not dragged out far beyond the last due instant.
      expect(times[times.length - 1] - sorted[sorted.length - 1]!).toBeLessThan(10_000);
      // Never before its paced due instant (same machine's clock; a few ms of rounding).
      for (const c of replayCalls) expect(c.at).toBeGreaterThanOrEqual(dues.get(c.id)! - 5);
      for (const id of ids) await statusIs(id, "succeeded");
    });
  });
}
