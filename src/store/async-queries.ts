import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";
import type { JobRow, JobStatus } from "./types.ts";

/** The worker hands an accepted async job over to its target; false: the job moved on meanwhile. */
export async function acceptAsync(
  db: Queryable,
  p: { owner: string; jobId: string; gen: number; leaseMs: number; attemptId: string; httpStatus: number | null },
): Promise<boolean> {
  const rows = await db.query(sql("AcceptAsync"), [p.owner, p.jobId, p.gen, p.leaseMs, p.attemptId, p.httpStatus]);
  return rows.length > 0;
}

export interface HeartbeatRow {
  lease_until: Date;
  cancel_requested: boolean;
  deadline_at: Date | null;
}

/** Renews the async lease of generation `gen`; `checkpoint` undefined keeps the stored one. */
export async function heartbeatAsync(
  db: Queryable,
  p: { jobId: string; gen: number; leaseMs: number; checkpoint: string | null | undefined },
): Promise<HeartbeatRow | undefined> {
  const rows = await db.query<HeartbeatRow>(sql("HeartbeatAsync"), [p.jobId, p.gen, p.leaseMs, p.checkpoint !== undefined, p.checkpoint ?? null]);
  return rows[0];
}

export interface AsyncFinish {
  jobId: string;
  gen: number;
  nextStatus: JobStatus;
  /** Retry delay from the database's now(); null keeps due_at. */
  delayMs: number | null;
  countsTry: boolean;
  lastError: string | null;
  deadReason: string | null;
  attemptOutcome: string;
  attemptError: string | null;
  possiblyDelivered: boolean;
  /** Refuse once the execution ceiling has passed (a target's report, not the ceiling itself). */
  beforeDeadline: boolean;
}

/** Ends the async attempt of generation `gen`; undefined: it had already ended (stale). */
export async function finishAsync(db: Queryable, f: AsyncFinish): Promise<JobRow | undefined> {
  const rows = await db.query<JobRow>(sql("FinishAsync"), [
    f.jobId,
    f.gen,
    f.nextStatus,
    f.delayMs,
    f.countsTry,
    f.lastError,
    f.deadReason,
    f.attemptOutcome,
    f.attemptError,
    f.possiblyDelivered,
    f.beforeDeadline,
  ]);
  const row = rows[0];
  if (row?.status === "scheduled") await db.query(sql("NotifyDue"), [String(row.due_at.getTime())]);
  return row;
}

export async function asyncPastDeadline(db: Queryable, limit: number): Promise<JobRow[]> {
  return db.query<JobRow>(sql("AsyncPastDeadline"), [limit]);
}
