import type { Queryable } from "./db.ts";
import type { ScheduleRow } from "./schedules.ts";
import { sql } from "./sql.ts";

// The statements of one occurrence-generation pass (src/dispatcher/schedule-generator.ts), each
// run in the pass's transaction (or a schedule's savepoint in it).

/** Schedules due to generate, of the shards given (of `count`), each locked to the end of the transaction; with the database's now. */
export async function dueSchedules(q: Queryable, batch: number, shards: number[], count: number): Promise<(ScheduleRow & { db_now: Date })[]> {
  return q.query<ScheduleRow & { db_now: Date }>(sql("DueSchedules"), [batch, shards, count]);
}

/** A schedule whose own fault (its rule, zone, plan, a value refused) stopped generation: paused, with why. */
export async function pauseBrokenSchedule(q: Queryable, tenant: string, id: string, reason: string): Promise<void> {
  await q.query(sql("PauseBrokenSchedule"), [tenant, id, reason]);
}

/** Coalesced occurrences before `before` expired (misfire policy fire_once); how many. */
export async function expireCoalesced(q: Queryable, tenant: string, id: string, before: Date): Promise<number> {
  return (await q.query(sql("ExpireCoalesced"), [tenant, id, before])).length;
}

/** The schedule's occurrences in progress and held behind them (overlap policy). */
export async function activeOccurrences(q: Queryable, tenant: string, id: string): Promise<{ active: number; held: number }> {
  const c = (await q.query<{ active: string | number; held: string | number }>(sql("ActiveOccurrences"), [tenant, id]))[0]!;
  return { active: Number(c.active), held: Number(c.held) };
}

/** Releases the oldest held occurrence (its release was missed). */
export async function releaseOldestHeld(q: Queryable, tenant: string, id: string): Promise<void> {
  await q.query(sql("ReleaseOldestHeld"), [tenant, id]);
}

/** Moves the schedule on after a pass: its next fire, the last nominal time generated, and the pass's counts. */
export async function advanceSchedule(
  q: Queryable,
  tenant: string,
  id: string,
  p: { nextFireAt: Date | null; lastNominal: Date | null; created: number; skipped: number; misfired: number; skipReason: string | null },
): Promise<void> {
  await q.query(sql("AdvanceSchedule"), [tenant, id, p.nextFireAt, p.lastNominal, p.created, p.skipped, p.misfired, p.skipReason]);
}
