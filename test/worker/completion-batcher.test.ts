// The completion batcher's lingering write (LINGER_MS, LINGER_BATCH in completion-batcher.ts):
// while outcomes stream in, a write waits for a batch's worth or the linger; after a quiet
// spell one is written at once; drain() writes what lingers at once. Against a real database,
// statements counted by a wrapper around it. The linger is set long here (a minute), so
// that whether an outcome waited does not depend on the box's speed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { silentLogger } from "../../src/obs/log.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import type { Db } from "../../src/store/db.ts";
import { claimDueIds } from "../../src/store/dispatch-queries.ts";
import { CompletionBatcher } from "../../src/worker/completion-batcher.ts";
import { successOf } from "../helpers/completion.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

for (const driver of DRIVERS) {
  describe(`completion batcher (${driver})`, () => {
    let t: TestDb;
    let writes = 0;
    /** The test database, counting the completion statements sent through it. */
    let counted: Db;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
      counted = {
        ...t.db,
        query: (text: string, params?: unknown[]) => {
          if (/Applies a batch of outcomes/.test(text)) writes++;
          return t.db.query(text, params);
        },
      } as Db;
    });
    afterAll(() => t?.close());

    /** n jobs claimed and started by worker w1: their completions. */
    async function running(n: number) {
      const jobs = await Promise.all(Array.from({ length: n }, () => insertJob(t.db)));
      const h = await takeShards(t.db, "disp");
      const claimed = await claimDueIds(t.db, {
        fence: h,
        limit: n,
        startLimit: n,
        token: tokenOf(h),
        ttlMs: 60_000,
        worker: "w1",
        ids: jobs.map((j) => j.id),
        attemptIds: jobs.map(() => Bun.randomUUIDv7()),
      });
      expect(claimed).toHaveLength(n);
      return claimed.map((c) => successOf({ job_id: c.id, gen: c.lease_generation, attempt_id: c.attempt_id! }));
    }
    const statusOf = async (id: string) => (await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [id]))[0]!.status;

    test("after a quiet spell an outcome is written at once; the next ones wait for a batch's worth, then go in one statement", async () => {
      const b = new CompletionBatcher(counted, "w1", silentLogger, undefined, 500, { ms: 60_000, batch: 3 });
      const [first, ...rest] = await running(4);
      writes = 0;
      expect(await b.push(first!)).toBe(true); // nothing written before: no linger
      expect(writes).toBe(1);
      const settled: boolean[] = [];
      const two = rest.slice(0, 2).map((c) => b.push(c).then((ok) => settled.push(ok)));
      await Bun.sleep(100);
      // Within the linger after a write, under a batch's worth: still waiting, nothing written.
      expect(settled).toEqual([]);
      expect(writes).toBe(1);
      expect(await statusOf(rest[0]!.job_id)).toBe("running");
      await Promise.all([b.push(rest[2]!), ...two]); // the third makes the batch
      expect(settled).toEqual([true, true]);
      expect(writes).toBe(2);
      for (const c of rest) expect(await statusOf(c.job_id)).toBe("succeeded");
      await b.drain();
    });

    test("drain() writes lingering outcomes at once", async () => {
      const b = new CompletionBatcher(counted, "w1", silentLogger, undefined, 500, { ms: 60_000, batch: 100 });
      const [first, second] = await running(2);
      writes = 0;
      await b.push(first!);
      const late = b.push(second!);
      await Bun.sleep(50);
      expect(await statusOf(second!.job_id)).toBe("running");
      await b.drain();
      expect(await late).toBe(true);
      expect(writes).toBe(2);
      expect(await statusOf(second!.job_id)).toBe("succeeded");
    });

    test("without a linger (ms 0) every outcome goes as soon as the last write ended", async () => {
      const b = new CompletionBatcher(counted, "w1", silentLogger, undefined, 500, { ms: 0, batch: 100 });
      const cs = await running(3);
      writes = 0;
      for (const c of cs) expect(await b.push(c)).toBe(true);
      expect(writes).toBe(3);
    });
  });
}
