import type { Db } from "../../src/store/db.ts";
import type { NewJob } from "../../src/store/jobs.ts";
import { insertJob } from "../helpers/jobs.ts";

export interface Death {
  reason?: string;
  signature?: string;
  /** Consecutive deaths with that signature (1: a first death). */
  streak?: number;
  replays?: number;
  /** When it died (default now). */
  at?: Date;
  schemaVersion?: number;
}

/**
 * A dead job straight in the store, as the worker leaves one (status, dead_reason, the
 * failure signature, finished_at, one call made): for API tests that need no deliveries.
 */
export async function insertDead(db: Db, over: Partial<NewJob> = {}, d: Death = {}) {
  const job = await insertJob(db, {
    due_at: new Date(Date.now() - 60_000),
    target: { url: "https://example.com/hook", method: "POST", headers: {}, body: '{"a":1}', json: true },
    ...over,
  });
  const reason = d.reason ?? "permanent";
  await db.query(
    `UPDATE jobs SET status = 'dead', dead_reason = $2, dead_signature = $3, dead_streak = $4, replays = $5,
       finished_at = $6, calls = 1, tries = 1, last_error = 'HTTP 400', schema_version = $7 WHERE id = $1`,
    [job.id, reason, d.signature ?? `${reason}:400`, d.streak ?? 1, d.replays ?? 0, d.at ?? new Date(), d.schemaVersion ?? 1],
  );
  return job.id;
}

export async function row(db: Db, id: string) {
  return (await db.query<Record<string, any>>("SELECT * FROM jobs WHERE id = $1", [id]))[0];
}

export async function auditRows(db: Db, where = "true", params: unknown[] = []) {
  return db.query<Record<string, any>>(`SELECT * FROM audit_log WHERE ${where} ORDER BY id`, params);
}
