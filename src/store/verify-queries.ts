import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";

export interface LastAttempt {
  id: string;
  number: number;
  outcome: string | null;
  possibly_delivered: boolean;
}

/** The job's latest call whose outcome is unknown (possibly_delivered), if any. */
export async function lastUnknownAttemptOf(db: Queryable, jobId: string): Promise<LastAttempt | undefined> {
  return (await db.query<LastAttempt>(sql("LastUnknownAttemptOf"), [jobId]))[0];
}

/** Ends a job succeeded on a verify answer; false when the job is no longer ours (owner + generation). */
export async function completeVerified(db: Queryable, p: { owner: string; jobId: string; gen: number; attemptId: string }): Promise<boolean> {
  const rows = await db.query<{ id: string }>(sql("CompleteVerified"), [p.owner, p.jobId, p.gen, p.attemptId]);
  return rows.length > 0;
}
