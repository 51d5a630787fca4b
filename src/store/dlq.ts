import type { Db, Queryable } from "./db.ts";
import { insertAuditBatch } from "./audit.ts";
import type { AuditEntry } from "./jobs.ts";
import { lockSchedulesForReplay } from "./schedules.ts";
import { sql } from "./sql.ts";
import type { JobRow } from "./types.ts";

/**
 * The shape of a stored job this code understands (jobs.schema_version); a dead job of any
 * other version is not replayed. New rows take it from the column default (009_dlq.sql): a
 * migration that changes the shape of jobs bumps the default and this constant together.
 */
export const JOB_SCHEMA_VERSION = 1;

/** Which dead jobs: the one filter shape of GET /v1/dlq and POST /v1/dlq/replay. */
export interface DeadFilter {
  /** null: every tenant. */
  tenant: string | null;
  scheduleId: string | null;
  /** Prefix of the failure signature ("permanent", "max_attempts:5"). */
  reasonPrefix: string | null;
  deadAfter: Date | null;
  deadBefore: Date | null;
  quarantined: boolean | null;
}

/** Keyset position: the last row's exact dead_at (text, microseconds) and id. */
export interface DeadCursor {
  deadKey: string;
  id: string;
}

export type DeadRow = JobRow & { dead_key: string };

/** Dead jobs oldest death first, after the cursor, at most limit. */
export async function listDead(db: Queryable, f: DeadFilter, quarantineAfter: number, after: DeadCursor | null, limit: number): Promise<DeadRow[]> {
  const rest = [f.scheduleId, f.reasonPrefix, f.deadAfter, f.deadBefore, f.quarantined, quarantineAfter, after?.deadKey ?? null, after?.id ?? null, limit];
  if (f.tenant !== null) return db.query<DeadRow>(sql("ListDeadInTenant"), [f.tenant, ...rest]);
  return db.query<DeadRow>(sql("ListDeadAll"), rest);
}

/** Quarantined: it died the same way after quarantineAfter replays (see 009_dlq.sql). */
export function isQuarantined(j: Pick<JobRow, "dead_streak">, quarantineAfter: number): boolean {
  return j.dead_streak > quarantineAfter;
}

export interface ReplayItem {
  id: string;
  /** The version the checks saw: a job changed since is left alone. */
  version: number;
  /** Due this long after the start. */
  offsetMs: number;
}

export interface ReplayRequest {
  items: ReplayItem[];
  /** Bulk: reserve paced slots this far apart (durable, see dlq_replay_pace); null: due now. */
  paceStepMs: number | null;
  /** Only rows of this tenant (null: any); the checks already looked, this is a second lock. */
  tenant: string | null;
  /** The audit row of each job replayed, written in the same transaction. */
  audit: (row: JobRow) => AuditEntry;
  /** One more row for the whole request (a bulk replay's summary). */
  summary?: (rows: JobRow[]) => AuditEntry;
}

/** Puts dead jobs back to scheduled (same ids), audited, and wakes the dispatchers. */
export async function replayDead(db: Db, r: ReplayRequest): Promise<JobRow[]> {
  if (r.items.length === 0 && !r.summary) return [];
  return db.tx(async (q) => {
    let rows: JobRow[] = [];
    if (r.items.length > 0) {
      // A replayed occurrence is in progress again: its schedule's occurrence made ahead is taken back.
      await lockSchedulesForReplay(
        q,
        r.items.map((i) => i.id),
      );
      let start: Date | null = null;
      if (r.paceStepMs !== null) {
        start = (await q.query<{ start: Date }>(sql("ReserveReplayPace"), [r.items.length, r.paceStepMs]))[0].start;
      }
      rows = await q.query<JobRow>(sql("ReplayJobs"), [
        r.items.map((i) => i.id),
        start,
        r.items.map((i) => i.version),
        r.items.map((i) => i.offsetMs),
        r.tenant,
      ]);
    }
    const audit = rows.map(r.audit);
    if (r.summary) audit.push(r.summary(rows));
    await insertAuditBatch(q, audit);
    if (rows.length > 0) await q.query(sql("NotifyDue"), [String(Math.min(...rows.map((j) => j.due_at.getTime())))]);
    return rows;
  });
}

/** The first instant a bulk replay would use now (changes nothing). */
export async function peekReplayPace(db: Queryable): Promise<Date> {
  return (await db.query<{ start: Date }>(sql("PeekReplayPace")))[0].start;
}
