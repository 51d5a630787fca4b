/**
 * Pre-staging: the dispatcher claims a burst shortly before its due second, so it is in
 * workers' hands when the second comes; workers hold each job until its due instant. A job
 * handed to a worker early, by the dispatcher or by anything else, is never called early:
 * the worker waits for the instant, and the pre-call check in the database refuses it
 * before then whatever the worker's clock says.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { afterAPass, api, startScheduler, startSplit } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

for (const driver of DRIVERS) {
  describe(`pre-staging (${driver})`, () => {
    let t: TestDb | undefined;
    let rt: Runtime | undefined;
    let target: Target | undefined;

    const stops: (() => Promise<void>)[] = [];
    afterEach(async () => {
      await rt?.stop();
      for (const stop of stops.splice(0)) await stop();
      await t?.close();
      target?.stop();
      rt = t = target = undefined;
    });

    /** Calls made before their job's due instant, by the database's clock. */
    async function earlyAttempts(db: TestDb["db"]): Promise<number> {
      const [r] = await db.query<{ n: string | number }>("SELECT count(*) AS n FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.started_at < j.due_at");
      return Number(r!.n);
    }

    test("a burst is claimed before its due second and called from it, never before", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_PRESTAGE: "1500ms", WORKER_CONCURRENCY: "200" });
      const due = new Date(Math.ceil((Date.now() + 2500) / 1000) * 1000);
      const res = await api(rt, "POST", "/v1/jobs/batch", {
        jobs: Array.from({ length: 150 }, (_, i) => ({ run_at: due.toISOString(), target: { url: `${target!.url}/b/${i}` } })),
      });
      expect(res.status).toBe(200);
      // Shortly before the second: claimed (in a worker's hands), nothing called.
      await Bun.sleep(Math.max(0, due.getTime() - 250 - Date.now()));
      const [staged] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM jobs WHERE status IN ('queued','running') AND due_at > now()");
      expect(Number(staged!.n)).toBeGreaterThan(0);
      expect(target.calls.length).toBe(0);
      await eventually(() => target!.calls.length >= 150, 20_000, "all 150 calls");
      expect(Math.min(...target.calls.map((c) => c.at))).toBeGreaterThanOrEqual(due.getTime());
      expect(await earlyAttempts(t.db)).toBe(0);
    }, 30_000);

    test("a job put in the queue early by something else is taken, held until its instant, then called once", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_PRESTAGE: "10s" }, { mode: "worker" });
      const dueAt = new Date(Date.now() + 1500);
      const job = await insertJob(t.db, { due_at: dueAt, target: { url: `${target.url}/early`, method: "POST", headers: {}, body: null, json: false } });
      // A message that is in the queue 1.5 s before its time (no dispatcher runs here).
      await t.db.query("UPDATE jobs SET status = 'queued', queued_at = now(), epoch = 1, lease_until = now() + interval '1 min' WHERE id = $1", [job.id]);
      // The worker takes it at once (within its pre-staging horizon) and holds it.
      await eventually(async () => (await jobRow(t!.db, job.id)).status === "running", 1000, "the worker to take the early job");
      expect(target.calls.length).toBe(0);
      await eventually(() => target!.calls.length === 1, 5000, "the call at its instant");
      expect(target.calls[0]!.at).toBeGreaterThanOrEqual(dueAt.getTime());
      await eventually(async () => (await jobRow(t!.db, job.id)).status === "succeeded", 3000, "success");
      expect(await earlyAttempts(t.db)).toBe(0);
      await afterAPass([rt]);
      expect(target.calls.length).toBe(1);
    }, 15_000);

    test("without pre-staging a worker leaves an early message in the queue until it is due", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      rt = await startScheduler(t.db, {}, { mode: "worker" });
      const dueAt = new Date(Date.now() + 1200);
      const job = await insertJob(t.db, { due_at: dueAt, target: { url: `${target.url}/early`, method: "POST", headers: {}, body: null, json: false } });
      await t.db.query("UPDATE jobs SET status = 'queued', queued_at = now(), epoch = 1, lease_until = now() + interval '1 min' WHERE id = $1", [job.id]);
      // The worker has looked at the queue since, and left the early message there.
      await afterAPass([rt]);
      expect((await jobRow(t.db, job.id)).status).toBe("queued");
      await eventually(() => target!.calls.length === 1, 5000, "the call once due");
      expect(target.calls[0]!.at).toBeGreaterThanOrEqual(dueAt.getTime());
    }, 15_000);

    test("the database refuses the call while the job is not due, whatever the worker believes", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      let movedTo = 0;
      // Between the claim and the pre-call check, the job's instant moves 1 s ahead without a
      // version change: the worker's copy says due, the database says not yet. Split
      // processes: in --mode=all the claim is the check (startSplit).
      const split = await startSplit(
        t.db,
        {},
        {
          beforeStart: async (jobs) => {
            for (const j of jobs) {
              if (movedTo) continue;
              const [r] = await t!.db.query<{ due_at: Date }>("UPDATE jobs SET due_at = now() + interval '1 s' WHERE id = $1 RETURNING due_at", [j.id]);
              movedTo = r!.due_at.getTime();
            }
          },
        },
      );
      stops.push(split.stop);
      const res = await api(split.api, "POST", "/v1/jobs", { target: { url: `${target.url}/moved` } });
      expect(res.status).toBe(201);
      await eventually(() => target!.calls.length === 1, 8000, "the call after the moved instant");
      expect(movedTo).toBeGreaterThan(0);
      expect(target.calls[0]!.at).toBeGreaterThanOrEqual(movedTo);
      expect(await earlyAttempts(t.db)).toBe(0);
    }, 15_000);

    test("a cancel while the job waits for its instant ends it cancelled, never called", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_PRESTAGE: "10s" });
      const res = await api(rt, "POST", "/v1/jobs", { delay: "3s", target: { url: `${target.url}/c` } });
      expect(res.status).toBe(201);
      const id = res.body.id as string;
      await eventually(async () => (await jobRow(t!.db, id)).status === "running", 2000, "the job to be staged");
      const c = await api(rt, "POST", `/v1/jobs/${id}/cancel`, {});
      expect(c.status).toBe(202);
      await eventually(async () => (await jobRow(t!.db, id)).status === "cancelled", 2000, "cancelled");
      // Past its instant (plus a margin), still no call.
      await Bun.sleep(Math.max(0, Date.parse(res.body.due_at) + 300 - Date.now()));
      expect(target.calls.length).toBe(0);
    }, 15_000);
  });
}
