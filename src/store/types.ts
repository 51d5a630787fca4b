/**
 * Job states. One terminal transition per job.
 *   scheduled  waiting for due_at (or for a retry)
 *   queued     claimed by the dispatcher leader under its epoch, waiting for a worker
 *   running    claimed by a worker under a lease (owner + generation + lease_until)
 *   succeeded  the target answered 2xx (async: the callback reported success)
 *   dead       permanent failure, or attempts used up; kept for the dead-letter queue
 *   cancelled  cancelled by a user (a running job ends so when its worker stops)
 *   expired    not started before expires_at
 */
export type JobStatus = "scheduled" | "queued" | "running" | "succeeded" | "dead" | "cancelled" | "expired";
export const JOB_STATUSES: readonly JobStatus[] = ["scheduled", "queued", "running", "succeeded", "dead", "cancelled", "expired"];
export const TERMINAL: ReadonlySet<JobStatus> = new Set(["succeeded", "dead", "cancelled", "expired"]);

export interface Target {
  url: string;
  method: string;
  headers: Record<string, string>;
  /** Exactly the bytes to send; null: no body, or a body stored apart (body_ref). */
  body: string | null;
  /** True when the body came as JSON (content type defaults to application/json). */
  json: boolean;
  /** A large body lives in the payloads table under this content hash ("sha256:<hex>"). */
  body_ref?: string;
  /** Its size in bytes. */
  body_size?: number;
}

/** Per-target-host limits given with a job or schedule (calls per second, calls in flight). */
export interface HostLimits {
  rate?: number | null;
  concurrency?: number | null;
}

export interface JobRow {
  id: string;
  tenant: string;
  status: JobStatus;
  due_at: Date;
  scheduled_for: Date;
  priority: number;
  version: number;
  calls: number;
  tries: number;
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
  cancel_requested: boolean;
  throttle_until: Date | null;
  epoch: number | null;
  queued_at: Date | null;
  lease_owner: string | null;
  lease_generation: number;
  lease_until: Date | null;
  last_error: string | null;
  dead_reason: string | null;
  start_by: Date | null;
  catchup_after: Date | null;
  catchup: boolean;
  host_limits: HostLimits | null;
  /** Verify before retry (024): asked before a job whose last call is possibly delivered is called again. */
  verify_url?: string | null;
  /** Async jobs: the key their lease tokens are made with (never shown). */
  lease_key: string | null;
  /** Async jobs: the target's last checkpoint, JSON text. */
  checkpoint: string | null;
  /** Async jobs: the running attempt's execution ceiling. */
  deadline_at: Date | null;
  /** Dead letters (009_dlq.sql): stored shape, replays, how it last died, replay class. */
  schema_version: number;
  replays: number;
  dead_signature: string | null;
  dead_streak: number;
  replay: boolean;
  /** Its finish releases a held occurrence of its schedule, if one waits (029_release_flag.sql). */
  releases_held: boolean;
  /** 0..4095 from the id: the job's shard is slot × SCHEDULER_SHARDS / 4096. */
  slot: number;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * The columns a claim returns (ClaimDue, ClaimDueIds, ClaimQueued): what a call, its pre-call
 * check and its completion read, and nothing else. A claim returns hundreds of rows per
 * statement on the hot path, and every column is decoded in the event loop that also starts
 * the calls: the bookkeeping columns (created_at, updated_at, last_error, lease_until, …) cost
 * time there and no call uses them. The SQL lists these names in the same order; a test
 * compares them.
 */
export const CLAIMED_COLUMNS = [
  "id",
  "tenant",
  "status",
  "due_at",
  "scheduled_for",
  "priority",
  "version",
  "calls",
  "tries",
  "idempotency_key",
  "schedule_id",
  "nominal_time",
  "target",
  "max_attempts",
  "backoff_base_ms",
  "backoff_max_ms",
  "timeout_ms",
  "expires_at",
  "async",
  "cancel_requested",
  "throttle_until",
  "epoch",
  "queued_at",
  "lease_generation",
  "host_limits",
  "verify_url",
  "lease_key",
  "checkpoint",
  "slot",
  "catchup",
] as const satisfies readonly (keyof JobRow)[];

/** A job as a call needs it: see CLAIMED_COLUMNS. */
export type ClaimedJob = Pick<JobRow, (typeof CLAIMED_COLUMNS)[number]>;

/**
 * A claim's row: the job, then attempt_id: the attempt the claim opened for it when the
 * claim was also its pre-call check (ClaimDueIds for a worker in the dispatcher's process),
 * else null.
 */
export type ClaimRow = ClaimedJob & { attempt_id: string | null };

export interface AttemptRow {
  id: string;
  job_id: string;
  number: number;
  lease_generation: number;
  epoch: number | null;
  worker: string;
  started_at: Date;
  finished_at: Date | null;
  outcome: string | null;
  http_status: number | null;
  error: string | null;
  possibly_delivered: boolean;
  /** The target's verify URL said this (possibly delivered) call was processed: the job ended without another. */
  verified?: boolean;
  /** What the call reported after the reaper had recorded it lost (that verdict stands). */
  late_outcome: string | null;
  late_http_status: number | null;
  late_at: Date | null;
}
