import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";

/** A shard this dispatcher holds: its number and the epoch its lease was taken at. */
export interface ShardHold {
  shard: number;
  epoch: number;
}

/** What a claim is fenced by: the shards held (each checked on its lease row), and the region authority. */
export interface ShardFence {
  owner: string;
  shards: ShardHold[];
  /** The number of shards the slot space is cut into (SCHEDULER_SHARDS). */
  count: number;
  region: string;
  generation: number;
}

/** The shards a dispatcher holds now (`list`), of `count`: what its idle reads look for. */
export interface ShardSet {
  list: number[];
  count: number;
}

/**
 * How a read of the first rows in due order filters by shard: `list` null when every shard is
 * held (any row is one's own: one row read), else the shards and `look` rows at most.
 */
export function shardFilter(shards: ShardSet | undefined, look: number): { list: number[] | null; count: number; look: number } {
  if (!shards || new Set(shards.list).size >= shards.count) return { list: null, count: shards?.count ?? 1, look: 1 };
  return { list: shards.list, count: shards.count, look };
}

export const SLOTS = 4096;
/** The shard of a job id (UUIDv7: its last 12 bits are random), as the jobs.slot column computes it. */
export function shardOfJob(id: string, count: number): number {
  return Math.floor((parseInt(id.slice(-3), 16) * count) / SLOTS);
}

export interface ShardRow {
  shard: number;
  owner: string | null;
  epoch: number;
  leaseUntil: Date | null;
  acquiredAt: Date | null;
  free: boolean;
}

export async function joinShards(db: Queryable, owner: string, ttlMs: number, region: string): Promise<boolean> {
  return (await db.query(sql("ShardJoin"), [owner, ttlMs, region])).length > 0;
}

export async function leaveShards(db: Queryable, owner: string): Promise<void> {
  await db.query(sql("ShardLeave"), [owner]);
}

/** Every shard with its holder, and how many dispatchers are live. */
export async function shardState(db: Queryable, count: number, skewMs: number): Promise<{ shards: ShardRow[]; live: number }> {
  const rows = await db.query<{
    shard: number;
    owner: string | null;
    epoch: string | null;
    lease_until: Date | null;
    acquired_at: Date | null;
    free: boolean;
    live: string;
  }>(sql("ShardState"), [count, skewMs]);
  return {
    shards: rows.map((r) => ({
      shard: Number(r.shard),
      owner: r.owner,
      epoch: Number(r.epoch ?? 0),
      leaseUntil: r.lease_until,
      acquiredAt: r.acquired_at,
      free: r.free,
    })),
    live: Number(rows[0]?.live ?? 0),
  };
}

/** Takes those of `shards` that are still free; returns the ones taken. */
export async function acquireShards(
  db: Queryable,
  p: { owner: string; shards: number[]; ttlMs: number; skewMs: number; region: string },
): Promise<ShardHold[]> {
  if (p.shards.length === 0) return [];
  const rows = await db.query<{ name: string; epoch: string }>(sql("ShardAcquire"), [p.owner, p.shards, p.ttlMs, p.skewMs, p.region]);
  return rows.map((r) => ({ shard: Number(r.name.slice("dispatch:".length)), epoch: Number(r.epoch) }));
}

/** Extends the holds still ours; returns the shards renewed. */
export async function renewShards(db: Queryable, owner: string, holds: ShardHold[], ttlMs: number, region: string): Promise<Set<number>> {
  if (holds.length === 0) return new Set();
  const rows = await db.query<{ shard: number }>(sql("ShardRenew"), [owner, holds.map((h) => h.shard), holds.map((h) => h.epoch), ttlMs, region]);
  return new Set(rows.map((r) => Number(r.shard)));
}

export async function releaseShards(db: Queryable, owner: string, holds: ShardHold[]): Promise<number[]> {
  if (holds.length === 0) return [];
  const rows = await db.query<{ shard: number }>(sql("ShardRelease"), [owner, holds.map((h) => h.shard), holds.map((h) => h.epoch)]);
  if (rows.length > 0) await db.query(sql("NotifyShardsReleased"), [rows.map((r) => r.shard).join(",")]);
  return rows.map((r) => Number(r.shard));
}

/** For a transaction that must hold its shards to the end (occurrence generation): the shards still held. */
export async function lockShards(q: Queryable, f: ShardFence): Promise<number[]> {
  const rows = await q.query<{ shard: number }>(sql("LockShards"), [
    f.owner,
    f.shards.map((h) => h.shard),
    f.shards.map((h) => h.epoch),
    f.region,
    f.generation,
  ]);
  return rows.map((r) => Number(r.shard));
}
