import { type ShardFence, type ShardSet, shardFilter } from "./shards.ts";
import type { Db, Queryable } from "./db.ts";
import { sql } from "./sql.ts";
import type { ClaimRow } from "./types.ts";

/**
 * Fenced claim of due jobs, tagged with the holder's fencing token: into queued, or with
 * `worker` straight into running under that worker's lease.
 */
export interface ClaimParams {
  /** The shards held (each checked on its lease row in the claim's statement) and the region authority. */
  fence: ShardFence;
  limit: number;
  token: number;
  ttlMs: number;
  worker?: string;
  /** Pre-staging: also claim jobs due within this many ms (held by the worker until due). */
  horizonMs?: number;
  /** Only jobs of at least this priority (for reserved worker slots). */
  minPriority?: number;
  /**
   * With `worker`: open the attempts of up to this many of the claimed jobs that are due now
   * (the worker's free call slots), the claim being their pre-call check (ClaimDueIds).
   */
  startLimit?: number;
}

const fenceParams = (f: ShardFence) => ({ owner: f.owner, shards: f.shards.map((h) => h.shard), epochs: f.shards.map((h) => h.epoch) });
/** $1–$7 of every claim of due jobs: the fence's owner, shards and epochs, the limit, the token, the lease and the worker. */
const claimHead = (p: ClaimParams) => {
  const f = fenceParams(p.fence);
  return [f.owner, f.shards, f.epochs, p.limit, p.token, p.ttlMs, p.worker ?? null];
};

/** `lateMs`: claim only jobs at least this late (the reconciliation pass behind the Redis index). */
export async function claimDue(db: Queryable, p: ClaimParams & { lateMs?: number }) {
  return db.query<ClaimRow>(sql("ClaimDue"), [...claimHead(p), p.lateMs ?? 0, p.fence.region, p.fence.generation, p.fence.count]);
}

/**
 * The start at the claim (ClaimDueIds, ClaimDueRun): for a worker in this process, up to
 * startLimit of the claimed jobs, in due order, are started with attempt ids taken from
 * `attemptIds` (version 7, see 027): the n-th job started gets the n-th. The caller keeps the
 * ids to give the jobs back if the reply is lost.
 */
function startAtClaim(p: ClaimParams & { attemptIds?: string[] }): [number, string[]] {
  const startLimit = p.worker && p.attemptIds ? Math.min(p.startLimit ?? 0, p.attemptIds.length) : 0;
  return [startLimit, startLimit > 0 ? p.attemptIds! : []];
}

/** claimDue restricted to these job ids (candidates from the Redis index, validated here), started as startAtClaim says. */
export async function claimDueIds(db: Queryable, p: ClaimParams & { ids: string[]; attemptIds?: string[] }) {
  return db.query<ClaimRow>(sql("ClaimDueIds"), [
    ...claimHead(p),
    p.ids,
    p.fence.region,
    p.fence.generation,
    p.fence.count,
    p.horizonMs ?? 0,
    ...startAtClaim(p),
  ]);
}

/**
 * claimDueIds without a discovery before it: the oldest due jobs of one tenant and priority
 * sign (`cls`: 1, 0 or -1), catch-up runs and replays left out (their rates are the planner's).
 */
export async function claimDueRun(db: Queryable, p: ClaimParams & { tenant: string; cls: number; attemptIds?: string[] }) {
  return db.query<ClaimRow>(sql("ClaimDueRun"), [
    ...claimHead(p),
    p.tenant,
    p.fence.region,
    p.fence.generation,
    p.fence.count,
    p.horizonMs ?? 0,
    ...startAtClaim(p),
    p.cls,
  ]);
}

export async function expireDue(db: Queryable, limit: number) {
  return db.query<{ id: string }>(sql("ExpireDue"), [limit]);
}

/** Scheduled jobs NextDueAt reads at most, in due order, looking for one in the shards asked for. */
export const NEXT_DUE_LOOK = 64;

/**
 * When the next scheduled job of the shards `list` (of `count`) falls due, as far as the first
 * NEXT_DUE_LOOK scheduled jobs in due order tell: `at`, that instant; or, none of them being
 * in those shards, `notBefore`, the last one's (the next of these shards is no earlier);
 * neither when no job is scheduled in those shards. See NextDueAt. `from`: only jobs due from
 * that instant on.
 */
export async function nextDueAt(db: Queryable, shards: ShardSet, from?: Date): Promise<{ at?: Date; notBefore?: Date }> {
  const { list, count, look } = shardFilter(shards, NEXT_DUE_LOOK);
  const [r] = await db.query<{ mine: Date | null; read_to: Date | null; read: number }>(sql("NextDueAt"), [list, count, look, from?.toISOString() ?? null]);
  if (r?.mine) return { at: r.mine };
  if (r && r.read >= look && r.read_to) return { notBefore: r.read_to };
  return {};
}

export async function notifyQueued(db: Queryable, count: number) {
  await db.query(sql("NotifyQueued"), [String(count)]);
}

/**
 * Jobs whose lease passed go back to scheduled, in one transaction of two statements: lock
 * first, then look for open attempts with a snapshot taken after the locks (see
 * LockExpiredLeases), so a reap never leaves an attempt open behind it.
 */
export async function reapExpiredLeases(db: Db, p: { limit: number; skewMs: number }) {
  return db.tx(async (q) => {
    const locked = await q.query<{ id: string }>(sql("LockExpiredLeases"), [p.limit, p.skewMs]);
    if (locked.length === 0) return [];
    return q.query<{ id: string; was: string; in_call: boolean; now_status: string }>(sql("ReapLockedLeases"), [locked.map((r) => r.id)]);
  });
}

export async function countQueued(db: Queryable, cap: number, minPriority?: number): Promise<number> {
  const rows =
    minPriority === undefined
      ? await db.query<{ n: string }>(sql("CountQueued"), [cap])
      : await db.query<{ n: string }>(sql("CountQueuedAtLeast"), [cap, minPriority]);
  return Number(rows[0]?.n ?? 0);
}

export async function expireMisfired(db: Queryable, limit: number) {
  return db.query<{ id: string; tenant: string; schedule_id: string | null }>(sql("ExpireMisfired"), [limit]);
}

export interface CandidateRow {
  id: string;
  tenant: string;
  priority: number;
  due_at: Date;
  catchup: boolean;
}

export interface DueSample {
  candidates: CandidateRow[];
  /** Tenants sampled, and the last of them (name order, after the wrap-around). */
  sampled: number;
  lastTenant: string | null;
}

/**
 * Up to `tenants` tenants with scheduled jobs after `cursor` (wrapping round), and the oldest
 * claimable jobs of each tenant and priority class: `budget` shared between the tenants
 * sampled, at least 16 and at most `limit` each. See SampleDue.
 */
export async function sampleDue(
  db: Queryable,
  p: { cursor: string; tenants: number; budget: number; limit: number; horizonMs: number; shards: { list: number[]; count: number }; exclude?: string[] },
): Promise<DueSample> {
  const all = new Set(p.shards.list).size >= p.shards.count;
  const rows = await db.query<Omit<CandidateRow, "id"> & { id: string | null; sampled: number; last_tenant: string | null }>(sql("SampleDue"), [
    p.cursor,
    p.tenants,
    p.budget,
    p.limit,
    p.horizonMs,
    all ? null : p.shards.list,
    p.shards.count,
    p.exclude ?? [],
  ]);
  const candidates: CandidateRow[] = [];
  for (const r of rows) if (r.id !== null) candidates.push({ id: r.id, tenant: r.tenant, priority: r.priority, due_at: r.due_at, catchup: r.catchup });
  return { candidates, sampled: rows[0]?.sampled ?? 0, lastTenant: rows[0]?.last_tenant ?? null };
}

export async function candidatesByIds(db: Queryable, ids: string[], horizonMs: number, shards: { list: number[]; count: number }): Promise<CandidateRow[]> {
  if (ids.length === 0) return [];
  return db.query<CandidateRow>(sql("CandidatesByIds"), [ids, horizonMs, shards.list, shards.count]);
}

export async function tenantsInFlight(db: Queryable, tenants: string[]): Promise<Map<string, number>> {
  if (tenants.length === 0) return new Map();
  const rows = await db.query<{ tenant: string; n: string | number }>(sql("TenantsInFlight"), [tenants]);
  return new Map(rows.map((r) => [r.tenant, Number(r.n)]));
}
