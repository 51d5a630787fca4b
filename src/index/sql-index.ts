/**
 * The default due-time index: the jobs table itself (status, due_at), no Redis. The table is
 * the truth, so upsert and remove are no-ops, clear cannot empty it, and it is always built:
 * the built marker lives in memory only (a new process starts without one, which at worst
 * asks for a rebuild that has nothing to do).
 */
import type { Db } from "../store/db.ts";
import { indexDueList, indexEarliestDue, indexPing, indexSize } from "../store/index-queries.ts";
import { checkChanges, checkDueListParams, checkEntries, checkJobId, type DueChange, type DueEntry, type DueIndex } from "./due-index.ts";
import { withTimeout } from "../time/with-timeout.ts";

const DATE_MAX_MS = 8.64e15;

export interface SqlDueIndexOptions {
  /** ping() answers false after this long; default 1000 ms. */
  pingTimeoutMs?: number;
}

export class SqlDueIndex implements DueIndex {
  readonly kind = "sql" as const;
  private marker: string | null = null;
  private readonly pingTimeoutMs: number;

  /** The Db stays the caller's: close() does not close it. */
  constructor(
    private readonly db: Db,
    opts: SqlDueIndexOptions = {},
  ) {
    this.pingTimeoutMs = opts.pingTimeoutMs ?? 1000;
  }

  async entriesUpsert(p: { entries: DueEntry[] }): Promise<void> {
    checkEntries(p.entries);
  }

  async entriesRemove(p: { jobIds: string[] }): Promise<void> {
    p.jobIds.forEach(checkJobId);
  }

  async entriesCompareAndSet(p: { changes: DueChange[] }): Promise<number> {
    checkChanges(p.changes);
    return 0;
  }

  async dueList(p: { dueBy: number; limit: number }): Promise<DueEntry[]> {
    checkDueListParams(p);
    // Clamped to the range of a JS Date (Postgres would overflow further out).
    const dueBy = Math.min(Math.max(Math.floor(p.dueBy), -DATE_MAX_MS), DATE_MAX_MS);
    return indexDueList(this.db, dueBy, p.limit);
  }

  async earliestDue(): Promise<number | null> {
    return indexEarliestDue(this.db);
  }

  async size(): Promise<number> {
    return indexSize(this.db);
  }

  async clear(): Promise<void> {
    this.marker = null;
  }

  async builtMarkerGet(): Promise<string | null> {
    return this.marker;
  }

  async builtMarkerSet(p: { value: string }): Promise<void> {
    this.marker = p.value;
  }

  async ping(): Promise<boolean> {
    return withTimeout(
      this.pingTimeoutMs,
      async () => {
        try {
          return await indexPing(this.db);
        } catch {
          return false;
        }
      },
      false,
    );
  }

  async close(): Promise<void> {}
}
