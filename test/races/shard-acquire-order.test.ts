/**
 * Two dispatchers taking never-held shards at the same moment (a cluster's first start, or a
 * larger SCHEDULER_SHARDS) each insert the missing lease rows. Each asks in its own shuffled
 * order, and an insert that meets another's uncommitted insert of the same row waits for it:
 * one inserting 3 then 5 and the other 5 then 3 wait on each other, and PostgreSQL ends one
 * with a deadlock (40P01) after deadlock_timeout (1 s). ShardAcquire now inserts in shard
 * order, so the second waits for the first and then skips the rows it made.
 * PostgreSQL only: two sessions at once.
 */
import { describe, expect, test } from "bun:test";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { acquireShards } from "../../src/store/shards.ts";
import { describeDb } from "../helpers/db.ts";

describe("two dispatchers making the same new shard rows (postgres)", () => {
  const t = describeDb("postgres", "local");

  test("in opposite orders at once: no deadlock, each shard made once, by one of them", async () => {
    const a = openPostgres({ url: t.url!, maxConnections: 1 });
    const b = openPostgres({ url: t.url!, maxConnections: 1 });
    try {
      const shards = Array.from({ length: 256 }, (_, i) => i);
      const errors: string[] = [];
      for (let round = 0; round < 10; round++) {
        await t.db.query("DELETE FROM leases WHERE name LIKE 'dispatch:%'");
        const take = (db: typeof a, owner: string, list: number[]) =>
          acquireShards(db, { owner, shards: list, ttlMs: 60_000, skewMs: 0, region: "local" }).catch((err) => {
            errors.push(`${owner}: ${err.code ?? ""} ${err.message}`);
            return [];
          });
        const [ga, gb] = await Promise.all([take(a, "a", shards), take(b, "b", [...shards].reverse())]);
        const all = [...ga, ...gb].map((h) => h.shard).sort((x, y) => x - y);
        if (errors.length === 0) expect(all).toEqual(shards);
      }
      expect(errors).toEqual([]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
