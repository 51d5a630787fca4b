/**
 * A region failover racing a claim in flight: the move locks the authority row, then frees
 * the dispatch leases; the claim's fence locks its shards' lease rows and the authority row.
 * In opposite orders they deadlocked (one of them aborted with 40P01: a failed
 * `scheduler failover`, or a claim error). The fence must take the authority row first, so
 * the claim waits for the move, then finds its fence gone and claims nothing.
 * PostgreSQL only: two transactions at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { moveAuthority, seedAuthority } from "../../src/store/authority.ts";
import type { Db } from "../../src/store/db.ts";
import { claimDue } from "../../src/store/dispatch-queries.ts";
import { migrate } from "../../src/store/migrate.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { acquireShards, lockShards, type ShardFence } from "../../src/store/shards.ts";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { holdLocks } from "../helpers/paused-db.ts";
import { eventually } from "../helpers/target.ts";

const by = { actor: "test", reason: "lock order" };

describe("a failover racing a claim in flight (postgres)", () => {
  let url: string;
  let db: Db;
  beforeAll(async () => {
    url = await createDatabase();
    db = openPostgres({ url, maxConnections: 6 });
    await migrate(db);
  });
  afterAll(async () => {
    await db.close();
    await dropDatabase(url);
  });

  /** Backends of this database waiting on a lock. */
  const waiting = async () =>
    Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))[0]!.n);

  /**
   * Lines up: the test holds the authority row; the move queues on it first, then `fenced`
   * (a claim, or the fence of an occurrence-generation transaction) queues behind it. Then
   * the test lets go: the move gets the row before the claim.
   */
  async function race<T>(to: string, fenced: () => Promise<T>) {
    const holder = await holdLocks(db, "SELECT 1 FROM region_authority FOR UPDATE");
    let move: Promise<unknown> | undefined;
    let claim: Promise<T> | undefined;
    try {
      move = moveAuthority(db, { to, ttlMs: 60_000, by, action: "cluster.failover" });
      await eventually(async () => (await waiting()) === 1, 10_000, "the move to wait on the authority row");
      claim = fenced();
      await eventually(async () => (await waiting()) === 2, 10_000, "the claim to wait too");
    } finally {
      await holder.release();
    }
    const [m, c] = await Promise.allSettled([move, claim]);
    return { move: m, claim: c };
  }

  test("ClaimDue: no deadlock; the move commits and the claim takes nothing", async () => {
    await seedAuthority(db, "a");
    const shards = await acquireShards(db, { owner: "D", shards: [0], ttlMs: 60_000, skewMs: 0, region: "a" });
    const fence: ShardFence = { owner: "D", shards, count: 1, region: "a", generation: 0 };
    const job = await insertJob(db);
    const r = await race("b", () => claimDue(db, { fence, limit: 10, token: shards[0]!.epoch, ttlMs: 60_000 }));
    expect(r.move.status === "rejected" ? String(r.move.reason) : "ok").toBe("ok");
    expect(r.claim.status === "rejected" ? String(r.claim.reason) : "ok").toBe("ok");
    expect(r.claim.status === "fulfilled" ? r.claim.value : undefined).toEqual([]);
    expect((await jobRow(db, job.id)).status).toBe("scheduled");
  });

  test("LockShards (occurrence generation): no deadlock; the move commits and the fence holds nothing", async () => {
    // Home is b now (the test above); the move back to a is the same race.
    const shards = await acquireShards(db, { owner: "E", shards: [1], ttlMs: 60_000, skewMs: 0, region: "b" });
    const fence: ShardFence = { owner: "E", shards, count: 2, region: "b", generation: 1 };
    const r = await race("a", () => db.tx((q) => lockShards(q, fence)));
    expect(r.move.status === "rejected" ? String(r.move.reason) : "ok").toBe("ok");
    expect(r.claim.status === "rejected" ? String(r.claim.reason) : "ok").toBe("ok");
    expect(r.claim.status === "fulfilled" ? r.claim.value : undefined).toEqual([]);
  });
});
