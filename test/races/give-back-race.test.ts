/**
 * Issue 14, hole 6 (b), the store side: giving back jobs whose pre-call check (StartAttempts)
 * got no answer. The check may still be committing on the server when the worker, whose
 * connection dropped, gives the jobs back on another: the give-back must wait for it and then
 * remove the attempt it opened, or that attempt would stay open and be counted as a lost
 * call. Forced here with the check's transaction held open on the test's own connection.
 */
import { describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDue, reapExpiredLeases } from "../../src/store/dispatch-queries.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { releaseUncalled, startAttempts } from "../../src/store/worker-queries.ts";
import { freshDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";
import { eventually } from "../helpers/target.ts";

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
        opened = (await startAttempts(q, "W", "local", [{ ...lease[0]!, version: c!.version }], { ttlMs: 60_000, marginMs: 0 })).length;
        await gate;
      });
      await eventually(() => opened === 1, 5000, "the check to open its attempt");
      const giveBack = releaseUncalled(t.db, "W", lease);
      // It waits on the job's row lock, which the check holds...
      await eventually(
        async () => {
          const [w] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM pg_locks WHERE NOT granted");
          return Number(w!.n) > 0;
        },
        5000,
        "the give-back to wait for the check's lock",
      );
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
      const [a] = await startAttempts(t.db, "W", "local", [{ id: again!.id, gen: again!.lease_generation, version: again!.version }], {
        ttlMs: 60_000,
        marginMs: 0,
      });
      expect(a!.number).toBe(1);
    } finally {
      await other.close();
      await t.close();
    }
  }, 20_000);
});
