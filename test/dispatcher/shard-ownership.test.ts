/**
 * A dispatcher takes free shards up to its fair share in one pass, even when some of those it
 * asks for cannot be taken now: a lease row an old holder's transaction still locks is
 * skipped (ShardAcquire, test/races/paused-holder.test.ts), and another free shard is taken
 * in its place. It asked for fair − held shards once, and a skipped one left it short until
 * its next pass, a third of the TTL later. PostgreSQL only: the lock is held by a session of
 * the test's own.
 */
import { describe, expect, test } from "bun:test";
import { ShardOwnership } from "../../src/dispatcher/shard-ownership.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { describeDb } from "../helpers/db.ts";
import { holdLocks } from "../helpers/paused-db.ts";

describe("a dispatcher's share of the shards (postgres)", () => {
  const t = describeDb("postgres", "local");

  test("a shard it cannot take now (its row locked by an old holder) is made up from the other free ones, in the same pass", async () => {
    const holder = openPostgres({ url: t.url!, maxConnections: 1 });
    try {
      // Eight times, as the shards it asks for first are shuffled: shard 0 is among them half the time.
      for (let round = 0; round < 8; round++) {
        await t.db.query("DELETE FROM leases WHERE name LIKE 'dispatch:%' OR name LIKE 'dispatcher:%'");
        // Four shards, lapsed an hour ago; one other live dispatcher: a fair share is 2.
        await t.db.query(
          `INSERT INTO leases (name, owner, epoch, lease_until, acquired_at)
           SELECT 'dispatch:' || s, 'old', s + 1, now() - interval '1 hour', now() - interval '2 hours' FROM generate_series(0, 3) s
           UNION ALL SELECT 'dispatcher:other', 'other', 0, now() + interval '1 hour', now()`,
        );
        // The old holder, paused inside a transaction that holds shard 0's row.
        const old = await holdLocks(holder, "SELECT name FROM leases WHERE name = 'dispatch:0' FOR SHARE");
        const mine = new ShardOwnership({
          db: t.db,
          owner: `taker-${round}`,
          count: 4,
          ttlMs: 60_000,
          skewMs: 0,
          region: "local",
          log: silentLogger,
          metrics: new Metrics(),
        });
        try {
          await mine.runOnce();
          const held = mine.current.map((h) => h.shard);
          expect(held).toHaveLength(2);
          expect(held).not.toContain(0);
        } finally {
          await old.release();
        }
      }
    } finally {
      await holder.close();
    }
  });
});
