/**
 * Issue 14, hole 6: claimed jobs must not be dropped after a commit.
 *
 * (a) The dispatcher of an `--mode=all` process claims straight into `running` under its
 *     local worker's lease. A step of the same pass that fails after the claim committed
 *     (index settling, reconciliation: forced here by the afterClaim seam) must not strand
 *     those jobs until their lease lapses: they are handed to the worker all the same.
 * (b) The pre-call check (StartAttempts) commits but its reply is lost (the afterStartAttempts
 *     seam throws after the statement answered): the worker cannot know whether it opened the
 *     attempts, so it calls nothing and gives back what it may have opened, by owner and
 *     lease generation, without a try. A `max_attempts: 1` job is then still called once and
 *     succeeds, instead of being reaped as a lost call and dying uncalled.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDue, reapExpiredLeases } from "../../src/store/dispatch-queries.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { releaseUncalled, startAttempts } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

for (const driver of DRIVERS) {
  describe(`claimed jobs are handed over after a commit (${driver})`, () => {
    let t: TestDb | undefined;
    let rt: Runtime | undefined;
    let target: Target | undefined;

    afterEach(async () => {
      await rt?.stop();
      await t?.close();
      target?.stop();
      rt = t = target = undefined;
    });

    test("an error after the dispatch claim committed: the claimed jobs still run at once, not a lease TTL later", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      let thrown = 0;
      // A long lease: a job stranded in running would wait 30 s for the reaper.
      rt = await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "30s" }, {
        afterClaim: async (jobs) => {
          if (jobs.length === 0) return;
          thrown++;
          throw new Error("test: a step after the claim failed");
        },
      });
      const res = await api(rt, "POST", "/v1/jobs/batch", {
        jobs: Array.from({ length: 5 }, (_, i) => ({ target: { url: `${target!.url}/a/${i}` } })),
      });
      expect(res.status).toBe(200);
      const ids: string[] = res.body.jobs.map((j: { id: string }) => j.id);
      const t0 = Date.now();
      await eventually(() => target!.calls.length >= 5, 3000, "all 5 claimed jobs called");
      expect(Date.now() - t0).toBeLessThan(3000);
      expect(thrown).toBeGreaterThan(0);
      for (const id of ids) {
        const row = await eventually(async () => {
          const r = await jobRow(t!.db, id);
          return r.status === "succeeded" ? r : undefined;
        }, 3000, `job ${id} succeeded`);
        expect([row.calls, row.tries]).toEqual([1, 1]);
      }
      await Bun.sleep(200);
      expect(target.calls.length).toBe(5);
    }, 20_000);

    test("a lost StartAttempts reply: nothing is called then, the attempt is given back uncounted, and a max_attempts: 1 job is called once and succeeds", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      let lost = 0;
      // A short lease: without the give-back the reaper would soon find the open attempt.
      rt = await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "1s" }, {
        afterStartAttempts: async (ids) => {
          if (lost > 0 || ids.length === 0) return;
          lost++;
          // The statement committed: its attempt rows are there, and the client sees an error.
          const [open] = await t!.db.query<{ n: string | number }>("SELECT count(*) AS n FROM attempts WHERE job_id = ANY($1::uuid[]) AND outcome IS NULL", [ids]);
          expect(Number(open!.n)).toBe(ids.length);
          throw new Error("test: connection lost before the reply");
        },
      });
      const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/b` }, retry: { max_attempts: 1 } })).body;
      const final = await eventually(async () => {
        const x = (await api(rt!, "GET", `/v1/jobs/${j.id}`)).body;
        return ["succeeded", "dead"].includes(x.status) ? x : undefined;
      }, 10_000, "a terminal state");
      expect(lost).toBe(1);
      expect(final.status).toBe("succeeded");
      expect(target.callsTo("/b")).toHaveLength(1);
      expect(target.callsTo("/b")[0]!.headers["scheduler-attempt"]).toBe("1");
      expect(final.attempt_log.map((a: { number: number; outcome: string }) => [a.number, a.outcome])).toEqual([[1, "success"]]);
      const row = await jobRow(t.db, j.id);
      expect([row.calls, row.tries]).toEqual([1, 1]);
    }, 20_000);
  });
}

describe("giving back uncalled jobs (postgres)", () => {
  test("a give-back waits for a pre-call check that is still committing, and removes the attempt it opened", async () => {
    const t = await freshDb("postgres");
    // The pre-call check runs on a connection of its own, in a transaction the test ends.
    const other = openPostgres({ url: t.url!, maxConnections: 1 });
    try {
      await seedAuthority(t.db, "local");
      const job = await insertJob(t.db, { max_attempts: 1 });
      const h = await takeShards(t.db, "disp");
      const [c] = await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000, worker: "W" });
      expect(c!.id).toBe(job.id);
      const lease = [{ id: c!.id, gen: c!.lease_generation }];
      let commit!: () => void;
      const gate = new Promise<void>((r) => (commit = r));
      let opened = 0;
      // The worker's StartAttempts has run but not committed: to the worker, its connection dropped.
      const check = other.tx(async (q) => {
        opened = (await startAttempts(q, "W", "local", [{ ...lease[0]!, version: c!.version }])).length;
        await gate;
      });
      await eventually(() => opened === 1, 5000, "the check to open its attempt");
      const giveBack = releaseUncalled(t.db, "W", lease);
      // It waits on the job's row lock, which the check holds...
      await eventually(async () => {
        const [w] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM pg_locks WHERE NOT granted");
        return Number(w!.n) > 0;
      }, 5000, "the give-back to wait for the check's lock");
      // ...until the check commits: then it sees the attempt the check opened.
      commit();
      await check;
      expect((await giveBack).map((r) => [r.id, r.status])).toEqual([[job.id, "scheduled"]]);
      const row = await jobRow(t.db, job.id);
      expect([row.status, row.calls, row.tries, row.lease_owner]).toEqual(["scheduled", 0, 0, null]);
      expect(await t.db.query("SELECT id FROM attempts WHERE job_id = $1", [job.id])).toHaveLength(0);
      // Nothing is left for the reaper to count, and a repeated give-back matches nothing.
      await t.db.query("UPDATE jobs SET lease_until = now() - interval '1 s' WHERE id = $1", [job.id]);
      expect(await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 })).toHaveLength(0);
      expect(await releaseUncalled(t.db, "W", lease)).toHaveLength(0);
      // The next claim's first call is attempt 1 again.
      const [again] = await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000, worker: "W" });
      const [a] = await startAttempts(t.db, "W", "local", [{ id: again!.id, gen: again!.lease_generation, version: again!.version }]);
      expect(a!.number).toBe(1);
    } finally {
      await other.close();
      await t.close();
    }
  }, 20_000);
});
