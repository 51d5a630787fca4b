import type { Db, Queryable } from "./db.ts";
import { insertAudit, transactionNow, type Actor } from "./jobs.ts";
import { retireScheduleKeys } from "./signing-keys.ts";
import { type Payload, storePayloads } from "./payloads.ts";
import { sql } from "./sql.ts";
import { type ShardSet, shardFilter } from "./shards.ts";
import type { HostLimits, Target } from "./types.ts";

export type Misfire = "skip" | "fire_once" | "fire_all";
export type Overlap = "allow" | "skip" | "queue";

/** What a schedule holds, as written. Durations in ms, instants as Date. */
export interface ScheduleFields {
  tenant: string;
  id: string;
  cron: string;
  timezone: string;
  dst_gap: "shift" | "skip" | null;
  dst_fold: "first" | "last" | "both" | null;
  target: Target;
  priority: number;
  max_attempts: number;
  backoff_base_ms: number;
  backoff_max_ms: number;
  timeout_ms: number;
  misfire: Misfire;
  misfire_grace_ms: number | null;
  catchup_window_ms: number;
  overlap: Overlap;
  max_queued: number;
  window_ms: number;
  paused: boolean;
  paused_reason?: string | null;
  start_at: Date | null;
  end_at: Date | null;
  next_fire_at: Date | null;
  host_limits?: HostLimits | null;
  /** Occurrences are async jobs (the target accepts, then heartbeats and completes). */
  async?: boolean;
  /** Verify before retry: copied to each occurrence. */
  verify_url?: string | null;
}

export interface ScheduleRow
  extends Omit<ScheduleFields, "backoff_base_ms" | "backoff_max_ms" | "timeout_ms" | "misfire_grace_ms" | "catchup_window_ms" | "window_ms"> {
  backoff_base_ms: number;
  backoff_max_ms: number;
  timeout_ms: number;
  misfire_grace_ms: number | null;
  catchup_window_ms: number;
  window_ms: number;
  paused_reason: string | null;
  last_nominal_at: Date | null;
  occurrences_generated: number;
  occurrences_skipped: number;
  occurrences_misfired: number;
  last_skip_at: Date | null;
  last_skip_reason: string | null;
  /** The nominal time of the occurrence last made ahead of its instant (031); NULL when none. */
  staged_fire_at?: Date | null;
  /** The next fire for which making ahead was declined (031). */
  ahead_checked_at?: Date | null;
  version: number;
  created_at: Date;
  updated_at: Date;
}

/** A row back into the fields it was written from (for merging a patch). */
export function fieldsOf(r: ScheduleRow): ScheduleFields {
  return {
    tenant: r.tenant,
    id: r.id,
    cron: r.cron,
    timezone: r.timezone,
    dst_gap: r.dst_gap,
    dst_fold: r.dst_fold,
    target: r.target,
    priority: r.priority,
    max_attempts: r.max_attempts,
    backoff_base_ms: r.backoff_base_ms,
    backoff_max_ms: r.backoff_max_ms,
    timeout_ms: r.timeout_ms,
    misfire: r.misfire,
    misfire_grace_ms: r.misfire_grace_ms,
    catchup_window_ms: r.catchup_window_ms,
    overlap: r.overlap,
    max_queued: r.max_queued,
    window_ms: r.window_ms,
    paused: r.paused,
    paused_reason: r.paused_reason,
    start_at: r.start_at,
    end_at: r.end_at,
    next_fire_at: r.next_fire_at,
    host_limits: r.host_limits ?? null,
    async: r.async ?? false,
    verify_url: r.verify_url ?? null,
  };
}

const wake = async (q: Queryable, next: Date | null) => {
  if (next) await q.query(sql("NotifyScheduleDue"), [`s${next.getTime()}`]);
};

/** A tenant at its schedule quota (issue 16, hole 8). */
export class ScheduleQuotaError extends Error {
  override readonly name = "ScheduleQuotaError";
}

/**
 * Inserts a schedule; undefined when the id is taken in the tenant. `firstFire`, when given,
 * sets next_fire_at from the database's now() read in this same transaction: the first fire
 * is never decided by the process clock. `maxSchedules`, when given, is the tenant's quota
 * (ScheduleQuotaError beyond it).
 */
export async function insertSchedule(
  db: Db,
  s: ScheduleFields,
  by: Actor,
  payloads: Payload[] = [],
  firstFire?: (dbNowMs: number) => Date | null,
  maxSchedules?: number,
): Promise<ScheduleRow | undefined> {
  return db.tx(async (q) => {
    await storePayloads(q, payloads);
    if (firstFire) s = { ...s, next_fire_at: firstFire((await transactionNow(q)).getTime()) };
    const row = (await q.query<ScheduleRow>(sql("InsertSchedule"), [JSON.stringify(s)]))[0];
    if (!row) return undefined;
    if (maxSchedules !== undefined) {
      // The insert's trigger counted it (migration 030) and holds the tenant's count row to the
      // commit: creations in a tenant pass here one at a time, each counting every one
      // committed before it, so two cannot both fit in the last place. Only from here on are
      // they serial (a lock taken first held the whole transaction, ~2 ms a creation).
      const n = Number((await q.query<{ n: string }>(sql("CountTenantSchedules"), [s.tenant]))[0]!.n);
      if (n > maxSchedules)
        throw new ScheduleQuotaError(
          `tenant ${s.tenant} has ${n - 1} schedules, the most it may have (SCHEDULER_TENANT_MAX_SCHEDULES or its schedules= quota); delete one first`,
        );
    }
    await wake(q, row.next_fire_at);
    await insertAudit(q, { actor: by.actor, tenant: row.tenant, action: "schedule.created", objectId: row.id, reason: by.reason ?? null });
    return row;
  });
}

export async function getSchedule(db: Queryable, tenant: string, id: string): Promise<ScheduleRow | undefined> {
  return (await db.query<ScheduleRow>(sql("GetSchedule"), [tenant, id]))[0];
}

export async function listSchedules(db: Queryable, p: { tenant: string | null; after: { tenant: string; id: string } | null; limit: number }) {
  return db.query<ScheduleRow>(sql("ListSchedules"), [p.tenant, p.after?.tenant ?? null, p.after?.id ?? null, p.limit]);
}

export type UpdateResult = { kind: "updated"; row: ScheduleRow } | { kind: "missing" } | { kind: "version"; current: number };

/**
 * Reads the schedule under a row lock, lets `change` compute the new fields (given the
 * database's now() of this transaction), writes them with version + 1. `ifVersion` makes it
 * conditional.
 */
export async function updateSchedule(
  db: Db,
  tenant: string,
  id: string,
  ifVersion: number | null,
  by: Actor & { action: string },
  change: (current: ScheduleRow, dbNowMs: number) => ScheduleFields,
  payloads: Payload[] = [],
): Promise<UpdateResult> {
  return db.tx(async (q) => {
    await storePayloads(q, payloads);
    const locked = (await q.query<ScheduleRow>(sql("GetScheduleForUpdate"), [tenant, id]))[0];
    if (!locked) return { kind: "missing" };
    if (ifVersion !== null && locked.version !== ifVersion) return { kind: "version", current: locked.version };
    // Any change applies to the schedule as if its occurrence made ahead had not been made.
    const current = await unstageOccurrence(q, locked);
    const next = change(current, (await transactionNow(q)).getTime());
    const row = (await q.query<ScheduleRow>(sql("ReplaceSchedule"), [JSON.stringify({ ...next, version: current.version })]))[0];
    if (!row) return { kind: "version", current: current.version };
    if (row.overlap === "queue" && current.overlap !== "queue") await q.query(sql("FlagReleasingOccurrences"), [tenant, id]);
    if (row.overlap === "allow" && current.overlap === "queue") {
      const released = await q.query<{ due_at: Date }>(sql("ReleaseAllHeld"), [tenant, id]);
      if (released.length > 0) await q.query(sql("NotifyDue"), [String(released[0].due_at.getTime())]);
    }
    if (!row.paused) await wake(q, row.next_fire_at);
    // An occurrence made ahead that the change took back: the audit says which.
    const takenBack = takenBackOf(locked, current);
    await insertAudit(q, {
      actor: by.actor,
      tenant,
      action: by.action,
      objectId: id,
      reason: by.reason ?? null,
      details: { version: row.version, ...(takenBack ? { occurrence_taken_back: takenBack } : {}) },
    });
    return { kind: "updated", row };
  });
}

export async function deleteSchedule(db: Db, tenant: string, id: string, by: Actor): Promise<{ row: ScheduleRow; cancelled: number } | undefined> {
  return db.tx(async (q) => {
    const row = (await q.query<ScheduleRow>(sql("DeleteSchedule"), [tenant, id]))[0];
    if (!row) return undefined;
    // An occurrence made ahead of its instant never fired: taken back (deleted), not cancelled.
    // The delete holds the row lock a generation pass takes, and the statement after it sees
    // what such a pass committed.
    await unstageOccurrence(q, row);
    const cancelled = await q.query(sql("CancelPendingOccurrences"), [tenant, id]);
    const keys = await retireScheduleKeys(q, tenant, id, { actor: by.actor, reason: by.reason ?? null });
    await insertAudit(q, {
      actor: by.actor,
      tenant,
      action: "schedule.deleted",
      objectId: id,
      reason: by.reason ?? null,
      details: { cancelled_occurrences: cancelled.length, ...(keys > 0 ? { retired_signing_keys: keys } : {}) },
    });
    return { row, cancelled: cancelled.length };
  });
}

/** Schedules NextFireAt reads at most, by next fire, looking for one in the shards asked for. */
export const NEXT_FIRE_LOOK = 64;

interface NextFireRow {
  due_mine: Date | null;
  due_to: Date | null;
  due_read: number;
  ahead_mine: Date | null;
  ahead_to: Date | null;
  ahead_read: number;
  db_now: Date;
}

/**
 * When generation has work next in the shards `list` (of `count`; absent: all): `at`, the next
 * fire of one of them or, with a lead (ms), the next instant an occurrence may be made ahead;
 * or, when the first NEXT_FIRE_LOOK read tell only that theirs is later, `notBefore`, the bound
 * they give (earlier than any `at` found, else `at` is given). Neither: none scheduled.
 * `from`: only fires from that instant on.
 */
export async function nextFireAt(db: Queryable, leadMs = 0, shards?: ShardSet, from?: Date): Promise<NextFire> {
  const { list, count, look } = shardFilter(shards, NEXT_FIRE_LOOK);
  // Two one-row aggregates: always one row.
  const r = (await db.query<NextFireRow>(sql("NextFireAt"), [leadMs, list, count, look, from?.toISOString() ?? null]))[0]!;
  const dbNow = r.db_now;
  const at = earliest(r.due_mine, r.ahead_mine);
  const bound = earliest(r.due_read >= look && !r.due_mine ? r.due_to : null, r.ahead_read >= look && !r.ahead_mine ? r.ahead_to : null);
  if (bound && (!at || bound < at)) return { notBefore: bound, dbNow };
  return at ? { at, dbNow } : { dbNow };
}

/** NextFireAt's answer: `at` or `notBefore` (see nextFireAt), and the database's clock when it answered. */
export interface NextFire {
  at?: Date;
  notBefore?: Date;
  dbNow: Date;
}

function earliest(a: Date | null, b: Date | null): Date | null {
  return a && b ? (a <= b ? a : b) : (a ?? b);
}

/** The nominal time (ISO) of the occurrence made ahead that unstageOccurrence took back, if it took one. */
function takenBackOf(before: ScheduleRow, after: ScheduleRow): string | null {
  const was = before.next_fire_at?.getTime();
  const now = after.next_fire_at?.getTime();
  return now !== undefined && was !== now ? after.next_fire_at!.toISOString() : null;
}

/**
 * The schedule locked for a manual run (or a replay) of it. Under overlap skip or queue a run
 * in progress at the next instant would skip that occurrence or hold it back: one made ahead
 * of its instant, which would start beside the run, is taken back for the instant to decide.
 */
export async function lockScheduleForRun(q: Queryable, tenant: string, id: string): Promise<ScheduleRow | undefined> {
  const locked = (await q.query<ScheduleRow>(sql("GetScheduleForUpdate"), [tenant, id]))[0];
  if (!locked || locked.overlap === "allow") return locked;
  return unstageOccurrence(q, locked);
}

/** lockScheduleForRun for the schedules of the jobs `ids` (a replay), in one statement and a fixed order. */
export async function lockSchedulesForReplay(q: Queryable, ids: string[]): Promise<void> {
  const rows = await q.query<ScheduleRow>(sql("LockSchedulesOfJobs"), [ids]);
  for (const row of rows) if (row.overlap !== "allow") await unstageOccurrence(q, row);
}

/**
 * Takes back an occurrence made ahead of its instant (SCHEDULER_OCCURRENCE_LEAD), so that a
 * change to the schedule applies as if it had not been made: the job is deleted and
 * next_fire_at goes back to it. The caller holds the schedule's row lock. A schedule never
 * made ahead (staged_fire_at NULL) costs nothing. Returns the row as it now is. Like every
 * change that moves next_fire_at, one that took an occurrence back tells the dispatchers
 * (their generation gates stand at the fire after it, and a job's NOTIFY does not open them).
 */
export async function unstageOccurrence(q: Queryable, row: ScheduleRow): Promise<ScheduleRow> {
  if (row.staged_fire_at === null || row.staged_fire_at === undefined) return row;
  const now = (await q.query<ScheduleRow>(sql("UnstageOccurrence"), [row.tenant, row.id]))[0] ?? row;
  if (!now.paused && takenBackOf(row, now)) await wake(q, now.next_fire_at);
  return now;
}
