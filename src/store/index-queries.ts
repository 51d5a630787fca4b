// The Redis due index's statements (sql/queries/index.sql): the outbox (migration 003), its
// relay, the capture switch (migration 004), and the reads that build and check the index.
import type { Queryable } from "./db.ts";
import type { LeaseHold } from "./leases.ts";
import { sql } from "./sql.ts";

/** Appends outbox rows in the order given (dueAt null: remove). Run inside the job's transaction. */
export async function outboxAppend(q: Queryable, items: { jobId: string; dueAt: Date | null }[]): Promise<void> {
  await q.query(sql("OutboxAppend"), [items.map((i) => i.jobId), items.map((i) => (i.dueAt ? i.dueAt.toISOString() : null))]);
}

/** Sets index_state.enabled; true when the setting changed. */
export async function indexCaptureSet(q: Queryable, enabled: boolean): Promise<boolean> {
  return (await q.query(sql("IndexCaptureSet"), [enabled])).length > 0;
}

/** Deletes up to `limit` of the oldest outbox rows; returns how many it deleted. */
export async function outboxDiscard(q: Queryable, limit: number): Promise<number> {
  return (await q.query<{ id: unknown }>(sql("OutboxDiscard"), [limit])).length;
}

/** The switch's lock_timeout, for the rest of its transaction. */
export async function indexCaptureLockTimeout(q: Queryable): Promise<void> {
  await q.query(sql("IndexCaptureLockTimeout"));
}

/** Locks jobs in SHARE mode: waits for job writers in flight, holds new ones to the commit. */
export async function indexCaptureLockWriters(q: Queryable): Promise<void> {
  await q.query(sql("IndexCaptureLockWriters"));
}

/** Whether capture of index changes is on (read without a lock). */
export async function indexCaptureGet(q: Queryable): Promise<boolean> {
  const [row] = await q.query<{ enabled: boolean }>(sql("IndexCaptureGet"));
  return row?.enabled === true;
}

/** The current state of these jobs, to tell stale index candidates. */
export async function indexValidate(q: Queryable, ids: string[]) {
  return q.query<{ id: string; status: string; due_at: Date }>(sql("IndexValidate"), [ids]);
}

export interface WindowRow {
  id: string;
  due_at: Date;
  /** due_at in microseconds, as text: the next page's cursor. */
  due_us: string;
}

/** One page of scheduled jobs due in [fromMs, toMs); `after`: the keyset cursor of the last row seen. */
export async function indexWindowLoad(
  q: Queryable,
  p: { fromMs: number | null; toMs: number; after: { us: string; id: string } | null; limit: number },
): Promise<WindowRow[]> {
  const rows = await q.query<{ id: string; due_at: Date; due_us: string | number | bigint }>(sql("IndexWindowLoad"), [
    p.fromMs === null ? null : String(Math.floor(p.fromMs)),
    String(Math.ceil(p.toMs)),
    p.after?.us ?? null,
    p.after?.id ?? null,
    p.limit,
  ]);
  return rows.map((r) => ({ id: r.id, due_at: r.due_at, due_us: String(r.due_us) }));
}

/** The relay lock, held to the end of the pass's transaction. */
export async function outboxRelayLock(q: Queryable): Promise<void> {
  await q.query(sql("OutboxRelayLock"));
}

/** Whether the coordinator lease is still held at this owner and epoch. */
export async function outboxRelayFence(q: Queryable, fence: Pick<LeaseHold, "name" | "owner" | "epoch">): Promise<boolean> {
  return (await q.query(sql("OutboxRelayFence"), [fence.name, fence.owner, fence.epoch])).length > 0;
}

export interface OutboxRow {
  /** A bigint, as text. */
  id: string;
  job_id: string;
  due_at: Date | null;
}

/** The oldest `limit` outbox rows, in id order. */
export async function outboxTake(q: Queryable, limit: number): Promise<OutboxRow[]> {
  const rows = await q.query<{ id: string | number | bigint; job_id: string; due_at: Date | null }>(sql("OutboxTake"), [limit]);
  return rows.map((r) => ({ id: String(r.id), job_id: r.job_id, due_at: r.due_at }));
}

export async function outboxPending(q: Queryable): Promise<boolean> {
  const [row] = await q.query<{ pending: boolean }>(sql("OutboxPending"));
  return row?.pending === true;
}

export async function outboxDelete(q: Queryable, ids: string[]): Promise<void> {
  await q.query(sql("OutboxDelete"), [ids]);
}

/** Seconds since the oldest pending outbox row was written; 0 when the outbox is empty. */
export async function outboxLag(q: Queryable): Promise<number> {
  const [row] = await q.query<{ lag: number | string }>(sql("OutboxLag"));
  return Number(row?.lag ?? 0);
}

// The default due-time index (src/index/sql-index.ts): the jobs table itself.

/** Scheduled jobs due by `dueByMs` (epoch ms, within a Date's range), oldest first. */
export async function indexDueList(q: Queryable, dueByMs: number, limit: number): Promise<{ jobId: string; dueMs: number }[]> {
  const rows = await q.query<{ id: string; due_at: Date }>(sql("IndexDueList"), [String(dueByMs), limit]);
  return rows.map((r) => ({ jobId: r.id, dueMs: r.due_at.getTime() }));
}

export async function indexEarliestDue(q: Queryable): Promise<number | null> {
  const [row] = await q.query<{ due_at: Date }>(sql("IndexEarliestDue"));
  return row ? row.due_at.getTime() : null;
}

export async function indexSize(q: Queryable): Promise<number> {
  const [row] = await q.query<{ n: string | number }>(sql("IndexSize"));
  return Number(row?.n ?? 0);
}

/** Whether the database answers (it throws when it does not). */
export async function indexPing(q: Queryable): Promise<boolean> {
  const [row] = await q.query<{ ok: number }>(sql("IndexPing"));
  return Number(row?.ok) === 1;
}
