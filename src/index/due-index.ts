/**
 * The due-time index: "which jobs are due by T, earliest first, at most N". Three
 * implementations answer it: the jobs table itself (the default, no Redis), Redis sorted sets
 * through Bun's RedisClient (REDIS_URL), and Redis sorted sets through @upstash/redis over
 * REST (UPSTASH_REDIS_REST_URL + token).
 *
 * The index is never the truth: it lists candidates, which the dispatcher validates in SQL.
 * A Redis index can be lost (flush, restart without persistence) and is rebuilt from SQL;
 * the built marker tells whether it still holds what was put in it.
 */

export interface DueEntry {
  jobId: string;
  /** Due instant in epoch milliseconds (an integer). */
  dueMs: number;
}

/**
 * A change made only while the job's entry still has the score `ifDueMs` (the due time it was
 * read with): moved to `dueMs`, or removed when dueMs is null.
 */
export interface DueChange {
  jobId: string;
  ifDueMs: number;
  dueMs: number | null;
}

export type DueIndexKind = "sql" | "redis" | "upstash";

/** The largest batch dueList hands out: every batch is bounded. */
export const DUE_LIST_MAX = 10_000;

export interface DueIndex {
  readonly kind: DueIndexKind;
  /**
   * Adds entries or moves existing ones to a new due time (ZADD): idempotent. A job id that
   * appears twice in one call keeps its last due time. The SQL index ignores this (the table
   * is the truth).
   */
  entriesUpsert(p: { entries: DueEntry[] }): Promise<void>;
  /** Removes entries by job id; unknown ids are ignored. The SQL index ignores this. */
  entriesRemove(p: { jobIds: string[] }): Promise<void>;
  /**
   * Compare and set, each entry atomically: applies a change only while the job's entry still
   * has the score the change names (ifDueMs); an entry that is missing or moved meanwhile (the
   * relay wrote a newer state) is left alone. A job named twice keeps its last change. Returns
   * how many entries changed. The SQL index ignores this (and returns 0).
   */
  entriesCompareAndSet(p: { changes: DueChange[] }): Promise<number>;
  /**
   * Up to `limit` (1..DUE_LIST_MAX) entries with dueMs <= dueBy, earliest first (ties by job
   * id), across all shards.
   */
  dueList(p: { dueBy: number; limit: number; shards?: readonly number[] }): Promise<DueEntry[]>;
  /** The earliest entry's due time, or null when the index is empty. */
  earliestDue(): Promise<number | null>;
  /** How many entries the index holds. */
  size(): Promise<number>;
  /** Removes every entry and the built marker. The SQL index only forgets its marker. */
  clear(): Promise<void>;
  /**
   * The built marker proves the index was built and has not been flushed or lost since:
   * whoever rebuilds the index sets it last; a missing marker means "rebuild".
   */
  builtMarkerGet(): Promise<string | null>;
  builtMarkerSet(p: { value: string }): Promise<void>;
  /** True when the backing store answers within a short timeout; never throws. */
  ping(): Promise<boolean>;
  /** Releases connections this index opened (not a Db it was given). */
  close(): Promise<void>;
}

/** Checks a dueList request; throws a clear Error on a bad one. */
export function checkDueListParams(p: { dueBy: number; limit: number }): void {
  if (typeof p.dueBy !== "number" || !Number.isFinite(p.dueBy)) {
    throw new Error(`dueList: dueBy must be a finite number of epoch ms, got ${String(p.dueBy)}`);
  }
  if (!Number.isInteger(p.limit) || p.limit < 1 || p.limit > DUE_LIST_MAX) {
    throw new Error(`dueList: limit must be an integer in 1..${DUE_LIST_MAX}, got ${String(p.limit)}`);
  }
}

/** Checks entries before they are written; throws a clear Error on a bad one. */
export function checkEntries(entries: DueEntry[]): void {
  for (const e of entries) {
    checkJobId(e.jobId);
    if (!Number.isSafeInteger(e.dueMs)) {
      throw new Error(`due index: dueMs of job ${e.jobId} must be an integer of epoch ms, got ${String(e.dueMs)}`);
    }
  }
}

/** Checks conditional changes before they are sent; throws a clear Error on a bad one. */
export function checkChanges(changes: DueChange[]): void {
  for (const c of changes) {
    checkJobId(c.jobId);
    for (const [what, v] of [
      ["ifDueMs", c.ifDueMs],
      ["dueMs", c.dueMs ?? 0],
    ] as const) {
      if (!Number.isSafeInteger(v)) throw new Error(`due index: ${what} of job ${c.jobId} must be an integer of epoch ms, got ${String(v)}`);
    }
  }
}

export function checkJobId(jobId: string): void {
  if (typeof jobId !== "string" || jobId.length === 0) {
    throw new Error(`due index: a job id must be a non-empty string, got ${JSON.stringify(jobId)}`);
  }
}

/** Earliest first; equal due times by job id, so every implementation agrees on order. */
export function compareDue(a: DueEntry, b: DueEntry): number {
  return a.dueMs - b.dueMs || (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0);
}
