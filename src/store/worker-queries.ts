import type { Db, Queryable } from "./db.ts";
import { sql } from "./sql.ts";
import type { ClaimRow } from "./types.ts";
import type { ShardFence } from "./shards.ts";

export interface Claimed {
  id: string;
  gen: number;
}

/** Takes queued jobs; nothing unless `region` holds the region authority. */
export async function claimQueued(
  db: Queryable,
  p: { owner: string; limit: number; leaseTtlMs: number; region: string; horizonMs?: number; minPriority?: number },
): Promise<ClaimRow[]> {
  return db.query<ClaimRow>(sql("ClaimQueued"), [p.owner, p.limit, p.leaseTtlMs, p.region, p.horizonMs ?? 0, p.minPriority ?? null]);
}

/**
 * Re-checks claimed jobs right before the call and opens an attempt for each that passes;
 * `region` must hold the authority at the generation the job was claimed under.
 */
/**
 * The pre-call check. `lease`: the TTL the lease is extended to, and the margin by which it
 * must still be live (the clock-skew margin): a job whose lease lapsed is not started.
 */
export async function startAttempts(
  db: Queryable,
  owner: string,
  region: string,
  jobs: { id: string; gen: number; version: number }[],
  lease: { ttlMs: number; marginMs: number },
) {
  if (jobs.length === 0) return [];
  return db.query<{ attempt_id: string; job_id: string; number: number; catchup: boolean }>(sql("StartAttempts"), [
    owner,
    jobs.map((j) => j.id),
    jobs.map((j) => j.gen),
    jobs.map((j) => j.version),
    region,
    lease.ttlMs,
    lease.marginMs,
    // Time-ordered (027): the stats window is a range of them. Made here, not in SQL: a SQL
    // function per row cost the check more than the ordered inserts saved.
    jobs.map(() => Bun.randomUUIDv7()),
  ]);
}

export async function renewLeases(db: Queryable, owner: string, jobs: Claimed[], ttlMs: number) {
  if (jobs.length === 0) return [];
  return db.query<{ id: string; cancel_requested: boolean }>(sql("RenewLeases"), [owner, jobs.map((j) => j.id), jobs.map((j) => j.gen), ttlMs]);
}

export interface Completion {
  job_id: string;
  gen: number;
  attempt_id: string;
  outcome: string;
  http_status: number | null;
  error: string | null;
  possibly_delivered: boolean;
  started_at: Date;
  finished_at: Date;
  next_status: string;
  /** Retry delay from the database's now(); null keeps due_at. */
  next_delay_ms: number | null;
  /** The job's last_error: the attempt's error, with why it ended so if it did. */
  last_error: string | null;
  counts_try: boolean;
  throttle_until: Date | null;
  dead_reason: string | null;
}

/** Applies outcomes in one statement; returns the jobs whose row changed (the others were late). */
export async function completeAttempts(db: Queryable, owner: string, items: Completion[]) {
  if (items.length === 0) return [];
  return db.query<{ id: string; status: string }>(sql("CompleteAttempts"), [owner, completionsJson(items)]);
}

/**
 * The batch as CompleteAttempts reads it: instants as epoch milliseconds (a Date's JSON is
 * an ISO string, ~3 % of a worker's time in a burst to write, and text for the database to
 * parse) and null fields left out (most of a success's).
 */
export function completionsJson(items: Completion[]): string {
  const wire: Record<string, unknown>[] = new Array(items.length);
  for (let i = 0; i < items.length; i++) {
    const c = items[i]!;
    const w: Record<string, unknown> = {
      job_id: c.job_id,
      gen: c.gen,
      attempt_id: c.attempt_id,
      outcome: c.outcome,
      possibly_delivered: c.possibly_delivered,
      started_ms: c.started_at.getTime(),
      finished_ms: c.finished_at.getTime(),
      next_status: c.next_status,
      counts_try: c.counts_try,
    };
    if (c.http_status !== null) w.http_status = c.http_status;
    if (c.error !== null) w.error = c.error;
    if (c.next_delay_ms !== null) w.next_delay_ms = c.next_delay_ms;
    if (c.last_error !== null) w.last_error = c.last_error;
    if (c.throttle_until !== null) w.throttle_until_ms = c.throttle_until.getTime();
    if (c.dead_reason !== null) w.dead_reason = c.dead_reason;
    wire[i] = w;
  }
  return JSON.stringify(wire);
}

export async function releaseJobs(db: Queryable, owner: string, jobs: Claimed[]) {
  if (jobs.length === 0) return [];
  return db.query<{ id: string; status: string }>(sql("ReleaseJobs"), [owner, jobs.map((j) => j.id), jobs.map((j) => j.gen)]);
}

/**
 * Claimed jobs handed back without a call (their host is at its limit), due again delayMs
 * after the database's now() (the host's pacing is this process's, the due instant the
 * database's); the dispatchers are told the earliest of those instants, so none waits for a
 * poll.
 */
export async function deferJobs(db: Queryable, owner: string, jobs: (Claimed & { delayMs: number })[]) {
  if (jobs.length === 0) return [];
  const rows = await db.query<{ id: string; due_at: Date }>(sql("DeferJobs"), [
    owner,
    jobs.map((j) => j.id),
    jobs.map((j) => j.gen),
    jobs.map((j) => Math.max(0, Math.ceil(j.delayMs))),
  ]);
  if (rows.length > 0) await db.query(sql("NotifyDeferred"), [String(Math.min(...rows.map((r) => r.due_at.getTime())))]);
  return rows;
}

/**
 * Jobs whose pre-call check failed, or whose reply was lost (it may have committed): none was
 * called. Back to scheduled by owner and generation, any attempt the check opened removed
 * (never a try), the dispatchers told. Two statements in one transaction: see LockUncalled.
 */
export async function releaseUncalled(db: Db, owner: string, jobs: Claimed[]) {
  if (jobs.length === 0) return [];
  const params = [owner, jobs.map((j) => j.id), jobs.map((j) => j.gen)];
  return db.tx(async (q) => {
    await q.query(sql("LockUncalled"), params);
    const rows = await q.query<{ id: string; status: string; due_at: Date }>(sql("ReleaseUncalled"), params);
    const back = rows.filter((r) => r.status === "scheduled");
    if (back.length > 0) await q.query(sql("NotifyDeferred"), [String(Math.min(...back.map((r) => r.due_at.getTime())))]);
    return rows;
  });
}

/**
 * A claim that was also its jobs' pre-call check got no answer (ClaimDueIds with a start
 * limit): the jobs it may have started are given back uncalled, found by the attempt ids it
 * was given, their attempts removed (never a try). Without this the reaper would count each
 * opened attempt as a lost call, and a max_attempts: 1 job would die uncalled.
 */
export async function releaseStartedAtClaim(db: Db, owner: string, jobIds: string[], attemptIds: string[]) {
  return releaseOpenedBy(db, owner, attemptIds, (q) => q.query(sql("LockStartedAtClaim"), [owner, jobIds]));
}

/**
 * releaseStartedAtClaim for a claim of a run (ClaimDueRun), whose jobs are not known before
 * its answer: step 1 waits for it through the dispatch lease rows it held (LockRunClaim).
 */
export async function releaseStartedAtRun(db: Db, owner: string, fence: ShardFence, attemptIds: string[]) {
  return releaseOpenedBy(db, owner, attemptIds, (q) => q.query(sql("LockRunClaim"), [fence.owner, fence.shards.map((h) => h.shard)]));
}

/** Waits for the lost claim (`waitForClaim`), finds the jobs it started by their attempt ids, gives them back uncalled. */
async function releaseOpenedBy(db: Db, owner: string, attemptIds: string[], waitForClaim: (q: Queryable) => Promise<unknown>) {
  if (attemptIds.length === 0) return [];
  const opened = await db.tx(async (q) => {
    await waitForClaim(q);
    return q.query<{ id: string; gen: number }>(sql("OpenedAtClaim"), [owner, attemptIds]);
  });
  return releaseUncalled(db, owner, opened);
}

/** See UnstartAtClaim: the attempts these claimed jobs' claim opened, taken back; the jobs stay claimed. */
export async function unstartAtClaim(db: Queryable, owner: string, jobs: { id: string; gen: number; attemptId: string }[]) {
  if (jobs.length === 0) return [];
  return db.query<{ id: string }>(sql("UnstartAtClaim"), [owner, jobs.map((j) => j.id), jobs.map((j) => j.gen), jobs.map((j) => j.attemptId)]);
}
