/**
 * The due-index outbox (sql/migrations/003_index_outbox.sql): what a job write wants the
 * Redis index to do, recorded in the job's own transaction so that the two cannot disagree
 * after a crash. The relay (outbox-relay.ts) applies the rows to the index.
 */
import type { Queryable } from "../store/db.ts";
import { outboxAppend } from "../store/index-queries.ts";

export interface OutboxItem {
  jobId: string;
  /** The job's new due instant; null removes it from the index. */
  dueAt: Date | null;
}

/** Appends rows in the order given (a later row for the same job wins). Call inside the job's transaction. */
export async function appendOutbox(q: Queryable, items: OutboxItem[]): Promise<void> {
  if (items.length === 0) return;
  for (const it of items) {
    if (it.dueAt !== null && !(it.dueAt instanceof Date && Number.isFinite(it.dueAt.getTime()))) {
      throw new Error(`index outbox: dueAt of job ${it.jobId} must be a valid Date or null`);
    }
  }
  await outboxAppend(q, items);
}
