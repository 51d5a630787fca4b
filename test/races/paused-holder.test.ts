/**
 * A dispatcher paused (SIGSTOP, a VM freeze, a GC pause, a silent network) in the middle of a
 * transaction that holds its shards' lease rows FOR SHARE: a claim's fence, a generation
 * pass's LockShards. Its leases lapse, but its locks stay until its session ends, and the
 * server may take hours to notice a client that went silent.
 *
 * (a) The takeover does not wait on such a row: ShardAcquire skips it (left for a later pass)
 *     and takes the rest. It waited, and the taker's whole ownership loop (its own renewals
 *     too) stalled for as long as the holder stayed paused; the 3-process shard test saw the
 *     paused dispatcher's shards never taken over (CI, session 29).
 * (b) The scheduler's own sessions carry idle_in_transaction_session_timeout = the lease TTL:
 *     the paused holder's transaction is ended by the server, its locks go, and its shards are
 *     taken over while it is still paused. When it wakes, its transaction is gone (nothing of
 *     it commits).
 * PostgreSQL only: sessions of their own.
 */
import { describe, expect, test } from "bun:test";
import type { Db } from "../../src/store/db.ts";
import { openDb } from "../../src/store/open.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { acquireShards, lockShards, type ShardFence } from "../../src/store/shards.ts";
import { describeDb } from "../helpers/db.ts";
import { eventually } from "../helpers/target.ts";

const REGION = "local";

describe("a shard holder paused inside a transaction (postgres)", () => {
  const t = describeDb("postgres", REGION);

  const free = () => t.db.query("UPDATE leases SET owner = NULL, lease_until = '-infinity' WHERE name LIKE 'dispatch:%'");
  /** Answers `p`'s value, or "waited" if it has none within `ms`. */
  const within = <T>(p: Promise<T>, ms: number) => Promise.race([p, Bun.sleep(ms).then(() => "waited" as const)]);

  /**
   * Owner "paused" takes shards `shards` for `ttlMs`, then opens a transaction that locks them
   * as a generation pass does, and stops there until `resume` is called. Resolves once the
   * locks are held; `ended` is the transaction's end (its error, if the server ended it).
   */
  async function pausedHolder(on: Db, shards: number[], ttlMs: number) {
    const held = await acquireShards(on, { owner: "paused", shards, ttlMs, skewMs: 0, region: REGION });
    expect(held.map((h) => h.shard).sort()).toEqual(shards);
    const fence: ShardFence = { owner: "paused", shards: held, count: 16, region: REGION, generation: 0 };
    let resume!: () => void;
    const woken = new Promise<void>((r) => {
      resume = r;
    });
    let locked!: () => void;
    const lockedNow = new Promise<void>((r) => {
      locked = r;
    });
    const ended = on
      .tx(async (q) => {
        expect(await lockShards(q, fence)).toHaveLength(shards.length);
        locked();
        await woken; // paused here, idle in its transaction, its lease rows locked
        await q.query("SELECT 1");
      })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    await lockedNow;
    return { held, resume, ended };
  }

  test("(a) the takeover skips a lease row still locked by its paused holder, takes the rest, and the row once it is free", async () => {
    await free();
    const holderDb = openPostgres({ url: t.url!, maxConnections: 2 }); // no idle timeout: paused for as long as the test says
    try {
      const p = await pausedHolder(holderDb, [0, 1], 300);
      await Bun.sleep(400); // the leases lapse; the locks stay
      const got = await within(acquireShards(t.db, { owner: "taker", shards: [0, 1, 2], ttlMs: 60_000, skewMs: 0, region: REGION }), 2000);
      // Before: the acquisition waited on rows 0 and 1 until the holder's transaction ended.
      expect(got).not.toBe("waited");
      expect((got as { shard: number }[]).map((h) => h.shard)).toEqual([2]);

      p.resume();
      expect(await p.ended).toBeUndefined(); // no timeout on this session: it committed
      const later = await acquireShards(t.db, { owner: "taker", shards: [0, 1], ttlMs: 60_000, skewMs: 0, region: REGION });
      expect(later.map((h) => h.shard).sort()).toEqual([0, 1]);
      // The new holder's fencing tokens are above the old holder's.
      for (const h of later) expect(h.epoch).toBeGreaterThan(Math.max(...p.held.map((x) => x.epoch)));
    } finally {
      await holderDb.close();
    }
  }, 20_000);

  test("(b) the scheduler's sessions end a transaction idle for a lease TTL: the paused holder's shards are taken while it is still paused", async () => {
    await free();
    // Opened as the scheduler opens its database, with a 1 s lease TTL.
    const holderDb = await openDb({ databaseUrl: t.url!, dataDir: "", workerConcurrency: 1, leaderTtlMs: 1000 });
    try {
      const p = await pausedHolder(holderDb, [5], 1000);
      const pausedAt = Date.now();
      const takenAt = await eventually(
        async () => {
          const got = await acquireShards(t.db, { owner: "taker", shards: [5], ttlMs: 60_000, skewMs: 0, region: REGION });
          return got.length === 1 ? Date.now() : undefined;
        },
        6000,
        "the paused holder's shard taken over",
      );
      // Within the TTL and a margin (the session ends at the TTL, as the lease lapses).
      expect(takenAt - pausedAt).toBeLessThan(3000);
      // Still paused: it wakes up now, and finds its transaction ended by the server.
      p.resume();
      const err = await p.ended;
      expect(err).toBeInstanceOf(Error);
      const [row] = await t.db.query<{ owner: string }>("SELECT owner FROM leases WHERE name = 'dispatch:5'");
      expect(row!.owner).toBe("taker");
      // Its pool reconnects: the process goes on (and its next renewal finds the shard lost).
      expect(await holderDb.query("SELECT 1 AS one")).toEqual([{ one: 1 }]);
    } finally {
      await holderDb.close();
    }
  }, 20_000);
});
