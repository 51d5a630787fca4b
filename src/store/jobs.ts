import type { Db, Queryable } from "./db.ts";
import { type Payload, storePayloads } from "./payloads.ts";
import { sql } from "./sql.ts";
import type { AttemptRow, HostLimits, JobRow, Target } from "./types.ts";

export interface NewJob {
  id: string;
  tenant: string;
  /**
   * "infinity": an occurrence held until the one before it finishes. null: due delay_ms after
   * the database's now() (a `delay`), computed in the INSERT.
   */
  due_at: Date | "infinity" | null;
  delay_ms?: number;
  priority: number;
  idempotency_key: string | null;
  request_hash: string | null;
  schedule_id: string | null;
  nominal_time: Date | null;
  target: Target;
  max_attempts: number;
  backoff_base_ms: number;
  backoff_max_ms: number;
  timeout_ms: number;
  expires_at: Date | null;
  window_ms: number;
  async: boolean;
  /** Occurrences: the due instant shown (a held occurrence's due_at is 'infinity'). */
  scheduled_for?: Date;
  start_by?: Date | null;
  catchup_after?: Date | null;
  catchup?: boolean;
  host_limits?: HostLimits | null;
  verify_url?: string | null;
  /** An occurrence a held one may wait behind: its finish runs the release (029). */
  releases_held?: boolean;
}

export type InsertResult =
  | { kind: "created"; job: JobRow }
  | { kind: "existing"; job: JobRow } // same key, same request
  | { kind: "conflict"; job: JobRow }; // same key, different request

/**
 * Inserts jobs in one transaction and wakes the dispatchers. A repeated idempotency key
 * inserts nothing: the unique index decides, so concurrent identical creates find one job.
 */
export async function insertJobs(db: Db, jobs: NewJob[], payloads: Payload[] = []): Promise<InsertResult[]> {
  if (jobs.length === 0) return [];
  return db.tx(async (q) => {
    // In the same transaction as the jobs that reference them: never a reference without its body.
    await storePayloads(q, payloads);
    return insertJobsIn(q, jobs);
  });
}

/** insertJobs inside a transaction the caller holds. */
export async function insertJobsIn(q: Queryable, jobs: NewJob[]): Promise<InsertResult[]> {
  // Without a key in the batch nothing can conflict: the insert skips ON CONFLICT's speculative path.
  const keyed = jobs.some((j) => j.idempotency_key !== null);
  const decided = await q.query<InsertedColumns>(sql(keyed ? "InsertJobs" : "InsertJobsUnkeyed"), [insertJson(jobs)]);
  const given = new Map(jobs.map((j) => [j.id, j]));
  const inserted = decided.map((d) => insertedRow(given.get(d.id)!, d));
  const byId = new Map(inserted.map((j) => [j.id, j]));
  const missingKeys = jobs.filter((j) => !byId.has(j.id) && j.idempotency_key);
  const existing = new Map<string, JobRow>();
  // Grouped by tenant: a batch may name several.
  const tenants = new Set(missingKeys.map((j) => j.tenant));
  for (const tenant of tenants) {
    const keys = missingKeys.filter((j) => j.tenant === tenant).map((j) => j.idempotency_key!);
    for (const row of await q.query<JobRow>(sql("GetJobsByKeys"), [tenant, keys])) {
      existing.set(`${row.tenant}\u0000${row.idempotency_key}`, row);
    }
  }
  const dues = inserted.map((j) => (j.due_at instanceof Date ? j.due_at.getTime() : NaN)).filter(Number.isFinite);
  if (dues.length > 0) await q.query(sql("NotifyDue"), [String(Math.min(...dues))]);
  return jobs.map((j): InsertResult => {
    const row = byId.get(j.id);
    if (row) return { kind: "created", job: row };
    const first = existing.get(`${j.tenant}\u0000${j.idempotency_key}`);
    if (!first) {
      // Within one batch two items with one key: the first inserted, the second sees it.
      const twin = inserted.find((r) => r.tenant === j.tenant && r.idempotency_key === j.idempotency_key);
      if (!twin) throw new Error(`job ${j.id} was neither inserted nor found by its key`);
      return { kind: twin.request_hash === j.request_hash ? "existing" : "conflict", job: twin };
    }
    return { kind: first.request_hash === j.request_hash ? "existing" : "conflict", job: first };
  });
}

/**
 * The batch as InsertJobs reads it: each instant as epoch milliseconds (`<name>_ms`; a held
 * occurrence's due_at as "Infinity"), absent values left out (NULL to json_to_recordset). A
 * Date's JSON is an ISO string to format here and to parse there: with six of them a job,
 * JSON.stringify of a batch took ~3x as long (bench/README.md, "creation").
 */
export function insertJson(jobs: NewJob[]): string {
  return JSON.stringify(
    jobs.map((j) => {
      const o: Record<string, unknown> = {
        id: j.id,
        tenant: j.tenant,
        priority: j.priority,
        target: j.target,
        max_attempts: j.max_attempts,
        backoff_base_ms: j.backoff_base_ms,
        backoff_max_ms: j.backoff_max_ms,
        timeout_ms: j.timeout_ms,
        window_ms: j.window_ms,
        async: j.async,
      };
      if (j.due_at !== null) o.due_at_ms = j.due_at === "infinity" ? "Infinity" : j.due_at.getTime();
      if (j.delay_ms !== undefined) o.delay_ms = j.delay_ms;
      if (j.scheduled_for) o.scheduled_for_ms = j.scheduled_for.getTime();
      if (j.idempotency_key != null) o.idempotency_key = j.idempotency_key;
      if (j.request_hash != null) o.request_hash = j.request_hash;
      if (j.schedule_id != null) o.schedule_id = j.schedule_id;
      if (j.nominal_time) o.nominal_time_ms = j.nominal_time.getTime();
      if (j.expires_at) o.expires_at_ms = j.expires_at.getTime();
      if (j.start_by) o.start_by_ms = j.start_by.getTime();
      if (j.catchup_after) o.catchup_after_ms = j.catchup_after.getTime();
      if (j.catchup !== undefined) o.catchup = j.catchup;
      if (j.host_limits != null) o.host_limits = j.host_limits;
      if (j.verify_url != null) o.verify_url = j.verify_url;
      if (j.releases_held) o.releases_held = true;
      return o;
    }),
  );
}

/** What InsertJobs returns of a row: what the database decided. */
type InsertedColumns = Pick<JobRow, "id" | "due_at" | "scheduled_for" | "epoch" | "schema_version" | "slot" | "created_at">;

/** The row as inserted: what the caller gave, what the database decided, and nulls for the state a new job does not have yet. */
function insertedRow(j: NewJob, d: InsertedColumns): JobRow {
  return {
    ...d,
    // The columns InsertJobs leaves to their defaults (001 and later migrations), as a new job has them.
    status: "scheduled",
    version: 1,
    calls: 0,
    tries: 0,
    lease_generation: 0,
    cancel_requested: false,
    catchup: j.catchup ?? false,
    replays: 0,
    dead_streak: 0,
    replay: false,
    releases_held: j.releases_held ?? false,
    updated_at: d.created_at,
    tenant: j.tenant,
    priority: j.priority,
    idempotency_key: j.idempotency_key,
    request_hash: j.request_hash,
    schedule_id: j.schedule_id,
    nominal_time: j.nominal_time,
    target: j.target,
    max_attempts: j.max_attempts,
    backoff_base_ms: j.backoff_base_ms,
    backoff_max_ms: j.backoff_max_ms,
    timeout_ms: j.timeout_ms,
    expires_at: j.expires_at,
    window_ms: j.window_ms,
    async: j.async,
    start_by: j.start_by ?? null,
    catchup_after: j.catchup_after ?? null,
    host_limits: j.host_limits ?? null,
    verify_url: j.verify_url ?? null,
    throttle_until: null,
    queued_at: null,
    lease_owner: null,
    lease_until: null,
    last_error: null,
    dead_reason: null,
    lease_key: null,
    checkpoint: null,
    deadline_at: null,
    dead_signature: null,
    finished_at: null,
  };
}

export async function getJob(db: Queryable, id: string, tenant: string | null): Promise<JobRow | undefined> {
  return (await db.query<JobRow>(sql("GetJob"), [id, tenant]))[0];
}

export async function listAttempts(db: Queryable, jobId: string): Promise<AttemptRow[]> {
  return db.query<AttemptRow>(sql("ListAttempts"), [jobId]);
}

export interface ListFilter {
  tenant: string | null;
  status: string | null;
  scheduleId: string | null;
  dueBefore: Date | null;
  dueAfter: Date | null;
  afterId: string | null;
  limit: number;
  /** Newest first: the page after afterId holds older jobs. */
  newestFirst?: boolean;
}

export async function listJobs(db: Queryable, f: ListFilter): Promise<JobRow[]> {
  const args = [f.status, f.scheduleId, f.dueBefore, f.dueAfter, f.afterId, f.limit];
  // A tenant's jobs come by its ids in job_tenants (028): the jobs table has no index on tenant.
  if (f.tenant !== null) return db.query<JobRow>(sql(f.newestFirst ? "ListTenantJobsNewest" : "ListTenantJobs"), [...args, f.tenant]);
  return db.query<JobRow>(sql(f.newestFirst ? "ListJobsNewest" : "ListJobs"), args);
}

/** Who asked for a change, for the audit log (written in the same transaction). */
export interface Actor {
  actor: string;
  reason?: string | null;
}

export async function cancelJob(db: Db, id: string, tenant: string | null, ifVersion: number | null, by: Actor): Promise<JobRow | undefined> {
  return db.tx(async (q) => {
    const row = (await q.query<JobRow>(sql("CancelJob"), [id, tenant, ifVersion]))[0];
    if (!row) return undefined;
    if (row.status === "running") await q.query(sql("NotifyCancel"), [row.id]);
    await insertAudit(q, {
      actor: by.actor,
      tenant: row.tenant,
      action: row.status === "running" ? "job.cancel_requested" : "job.cancelled",
      objectId: row.id,
      reason: by.reason ?? null,
      details: { version: row.version },
    });
    return row;
  });
}

/** Moves a job to dueAt, or to `delayMs` after the database's now(). */
export async function rescheduleJob(
  db: Db,
  id: string,
  tenant: string | null,
  dueAt: Date | { delayMs: number },
  ifVersion: number | null,
  by: Actor,
): Promise<JobRow | undefined> {
  const [at, delayMs] = dueAt instanceof Date ? [dueAt, null] : [null, dueAt.delayMs];
  return db.tx(async (q) => {
    const row = (await q.query<JobRow>(sql("RescheduleJob"), [id, tenant, at, ifVersion, delayMs]))[0];
    if (!row) return undefined;
    await q.query(sql("NotifyDue"), [String(row.due_at.getTime())]);
    await insertAudit(q, {
      actor: by.actor,
      tenant: row.tenant,
      action: "job.rescheduled",
      objectId: row.id,
      reason: by.reason ?? null,
      details: { due_at: row.due_at.toISOString(), version: row.version },
    });
    return row;
  });
}

export interface AuditEntry {
  actor: string;
  tenant: string | null;
  action: string;
  objectId: string | null;
  reason: string | null;
  details?: unknown;
}

/** now() of the transaction q is in (or of the statement, outside one), epoch ms. */
/** The database's clock now (clock_timestamp(), not the transaction's start): what DbClock syncs to. */
export async function databaseClock(q: Queryable): Promise<Date> {
  return (await q.query<{ now: Date }>(sql("DbClock")))[0]!.now;
}

export async function transactionNow(q: Queryable): Promise<Date> {
  return (await q.query<{ now: Date }>(sql("TransactionNow")))[0].now;
}

export async function insertAudit(db: Queryable, e: AuditEntry): Promise<void> {
  await db.query(sql("InsertAudit"), [e.actor, e.tenant, e.action, e.objectId, e.reason, JSON.stringify(e.details ?? null)]);
}
