import type { Queryable } from "./db.ts";
import type { ScheduleRow } from "./schedules.ts";
import { sql } from "./sql.ts";

// The statements of one occurrence-generation pass (src/dispatcher/schedule-generator.ts), each
// run in the pass's transaction (or a schedule's savepoint in it).

/**
 * Schedules due to generate, of the shards given (of `count`), each locked to the end of the
 * transaction; with the database's now. With a lead (ms), also those whose next occurrence may
 * be made that far ahead.
 */
export async function dueSchedules(q: Queryable, batch: number, shards: number[], count: number, leadMs = 0): Promise<(ScheduleRow & { db_now: Date })[]> {
  return q.query<ScheduleRow & { db_now: Date }>(sql("DueSchedules"), [batch, shards, count, leadMs]);
}

/** A schedule whose own fault (its rule, zone, plan, a value refused) stopped generation: paused, with why. */
export async function pauseBrokenSchedule(q: Queryable, tenant: string, id: string, reason: string): Promise<void> {
  await q.query(sql("PauseBrokenSchedule"), [tenant, id, reason]);
}

/** Coalesced occurrences before `before` expired (misfire policy fire_once); how many. */
export async function expireCoalesced(q: Queryable, tenant: string, id: string, before: Date): Promise<number> {
  return (await q.query(sql("ExpireCoalesced"), [tenant, id, before])).length;
}

export interface InProgress {
  active: number;
  held: number;
}

/** `tenant\0id`: a schedule's key in the maps below. */
export const scheduleKey = (tenant: string, id: string) => `${tenant}\u0000${id}`;

/** Of each schedule, its occurrences in progress and held behind them (overlap policy), by scheduleKey; one statement. */
export async function activeOccurrences(q: Queryable, schedules: { tenant: string; id: string }[]): Promise<Map<string, InProgress>> {
  const rows = await q.query<{ tenant: string; id: string; active: string | number; held: string | number }>(sql("ActiveOccurrences"), [
    JSON.stringify(schedules.map((s) => ({ tenant: s.tenant, id: s.id }))),
  ]);
  return new Map(rows.map((r) => [scheduleKey(r.tenant, r.id), { active: Number(r.active), held: Number(r.held) }]));
}

/** Releases the oldest held occurrence (its release was missed). */
export async function releaseOldestHeld(q: Queryable, tenant: string, id: string): Promise<void> {
  await q.query(sql("ReleaseOldestHeld"), [tenant, id]);
}

export interface Advance {
  tenant: string;
  id: string;
  nextFireAt: number | null;
  lastNominal: number | null;
  created: number;
  skipped: number;
  misfired: number;
  skipReason: string | null;
  /** The nominal time of an occurrence made ahead of its instant. */
  staged?: number;
  /** The next fire for which making ahead was declined (the instant decides it). */
  checked?: number;
}

/** Moves schedules on after a pass: each one's next fire, the last nominal time generated, and the pass's counts; one statement. */
export async function advanceSchedules(q: Queryable, advances: Advance[]): Promise<void> {
  if (advances.length === 0) return;
  const rows = advances.map((a) => ({
    tenant: a.tenant,
    id: a.id,
    next_fire_ms: a.nextFireAt,
    last_nominal_ms: a.lastNominal,
    created: a.created,
    skipped: a.skipped,
    misfired: a.misfired,
    skip_reason: a.skipReason,
    staged_ms: a.staged,
    checked_ms: a.checked,
  }));
  await q.query(sql("AdvanceSchedule"), [JSON.stringify(rows)]);
}
