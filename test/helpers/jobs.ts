import type { Db } from "../../src/store/db.ts";
import { insertJobs, type NewJob } from "../../src/store/jobs.ts";

/** A job row to insert straight into the store (no API), due now unless told otherwise. */
export function newJob(over: Partial<NewJob> = {}): NewJob {
  return {
    id: Bun.randomUUIDv7(),
    tenant: "default",
    due_at: new Date(Date.now() - 10),
    priority: 0,
    idempotency_key: null,
    request_hash: null,
    schedule_id: null,
    nominal_time: null,
    target: { url: "http://127.0.0.1:9/x", method: "POST", headers: {}, body: null, json: false },
    max_attempts: 5,
    backoff_base_ms: 1000,
    backoff_max_ms: 60_000,
    timeout_ms: 5000,
    expires_at: null,
    window_ms: 0,
    async: false,
    ...over,
  };
}

/** Inserts newJob(over) and returns its row. */
export async function insertJob(db: Db, over: Partial<NewJob> = {}) {
  const [r] = await insertJobs(db, [newJob(over)]);
  return r.job;
}

export async function jobRow(db: Db, id: string) {
  return (await db.query<Record<string, any>>("SELECT * FROM jobs WHERE id = $1", [id]))[0];
}
