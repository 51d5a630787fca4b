import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";
import type { LeaseHold } from "./leases.ts";

/** Fenced claim of due jobs into queued, tagged with the holder's fencing token. */
export async function claimDue(db: Queryable, p: { hold: LeaseHold; limit: number; token: number; queuedTtlMs: number }) {
  return db.query<{ id: string; due_at: Date; queued_at: Date }>(sql("ClaimDue"), [
    p.hold.name, p.hold.owner, p.hold.epoch, p.limit, p.token, p.queuedTtlMs,
  ]);
}

export async function expireDue(db: Queryable, limit: number) {
  return db.query<{ id: string }>(sql("ExpireDue"), [limit]);
}

export async function nextDueAt(db: Queryable): Promise<Date | undefined> {
  return (await db.query<{ due_at: Date }>(sql("NextDueAt")))[0]?.due_at;
}

export async function notifyQueued(db: Queryable, count: number) {
  await db.query(sql("NotifyQueued"), [String(count)]);
}

export async function reapExpiredLeases(db: Queryable, p: { limit: number; skewMs: number }) {
  return db.query<{ id: string; was: string; now_status: string; lost_attempts: string }>(sql("ReapExpiredLeases"), [p.limit, p.skewMs]);
}
