// The attempt log's write pattern (027): attempt ids are version 7 UUIDs (time-ordered, made
// by the pre-call check), and the completion updates the attempt row HOT (no index entry
// written). A new index on a column the completion sets, or a fillfactor back at 100, makes
// the second test fail; the stats window reads the id range the first one checks.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDueIds } from "../../src/store/dispatch-queries.ts";
import { completeAttempts, startAttempts } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { successOf } from "../helpers/completion.ts";
import { insertJob } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

const LEASE = { ttlMs: 60_000, marginMs: 0 };

for (const driver of DRIVERS) {
  describe(`attempt rows (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(() => t?.close());

    /** Claims and starts n new jobs as worker w1; returns their attempts. */
    async function started(n: number) {
      const jobs = await Promise.all(Array.from({ length: n }, () => insertJob(t.db)));
      const h = await takeShards(t.db, "disp");
      const claimed = await claimDueIds(t.db, { fence: h, limit: n, token: tokenOf(h), ttlMs: 60_000, worker: "w1", ids: jobs.map((j) => j.id) });
      expect(claimed).toHaveLength(n);
      return startAttempts(
        t.db,
        "w1",
        "local",
        claimed.map((c) => ({ id: c.id, gen: c.lease_generation, version: c.version })),
        LEASE,
      );
    }

    test("attempt ids are version 7 UUIDs, in the order they were opened", async () => {
      const [before] = await t.db.query<{ floor: string }>("SELECT uuid_v7_floor(now() - interval '1 second')::text AS floor");
      const first = await started(3);
      await Bun.sleep(2);
      const second = await started(3);
      const ids = [...first, ...second].map((a) => a.attempt_id);
      for (const id of ids) {
        expect(id[14]).toBe("7"); // the version nibble
        expect("89ab").toContain(id[19]); // the RFC 9562 variant
        expect(id > before.floor).toBe(true);
      }
      // Opened 2 ms apart: every id of the second batch sorts after every id of the first.
      expect(first.every((a) => second.every((b) => a.attempt_id < b.attempt_id))).toBe(true);
      const [after] = await t.db.query<{ floor: string }>("SELECT uuid_v7_floor(now() + interval '1 second')::text AS floor");
      expect(ids.every((id) => id < after.floor)).toBe(true);
    });

    test("a completion updates its attempt row HOT: no index entry written", async () => {
      const attempts = await started(5);
      const now = new Date();
      const hot = await t.db.tx(async (q) => {
        const done = await completeAttempts(
          q,
          "w1",
          attempts.map((a) => successOf({ job_id: a.job_id, gen: 1, attempt_id: a.attempt_id, started_at: now, finished_at: now })),
        );
        expect(done).toHaveLength(5);
        // This transaction's own counts: exact, not the collector's delayed ones.
        const [s] = await q.query<{ upd: string | number; hot: string | number }>(
          "SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_xact_user_tables WHERE relname = 'attempts'",
        );
        return { upd: Number(s.upd), hot: Number(s.hot) };
      });
      expect(hot).toEqual({ upd: 5, hot: 5 });
    });
  });
}
