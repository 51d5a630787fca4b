// How a job row is made, for each of the three ways one is made: a request (POST /v1/jobs,
// one per batch item), a schedule's occurrence (the generator) and a schedule's manual run
// (POST /v1/schedules/:id/trigger). One home, so that a new column, a default or the window's
// spread cannot be added to one path and forgotten in another.
import type { NewJob } from "./jobs.ts";
import type { ScheduleRow } from "./schedules.ts";
import type { HostLimits, Target } from "./types.ts";

/** What a request leaves unsaid (SCHEDULER_DEFAULT_*: config.jobDefaults). */
export interface JobDefaults {
  maxAttempts: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  timeoutMs: number;
}

/**
 * A job as the API accepted it: the parsed input (durations in ms), with what the route
 * resolved itself: the tenant, the target (its body perhaps stored apart), the request hash.
 */
export interface JobRequest {
  tenant: string;
  target: Target;
  run_at?: Date;
  delay?: number;
  window: number;
  priority: number;
  idempotency_key?: string;
  /** Canonical hash of the request, when it has an idempotency key; null otherwise. */
  request_hash: string | null;
  retry: { max_attempts?: number; base?: number; max?: number };
  timeout?: number;
  expires_at?: Date;
  async: boolean;
  host_limits: HostLimits | null;
  verify_url: string | null;
}

/**
 * The window spreads a burst over later instants, never earlier ones: a whole number of ms,
 * uniform in [0, windowMs].
 */
export function windowJitter(windowMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * (windowMs + 1));
}

/**
 * A requested job. A delay counts from the database's now(), in the INSERT (delay_ms): this
 * process's clock has no say, so no `now` is taken here. The caller checks what depends on
 * the resolved values (retry.max not below retry.base).
 */
export function newJob(r: JobRequest, defaults: JobDefaults, random: () => number = Math.random): NewJob {
  const jitter = windowJitter(r.window, random);
  const delayMs = r.run_at ? null : (r.delay ?? 0) + jitter;
  return {
    id: Bun.randomUUIDv7(),
    tenant: r.tenant,
    due_at: r.run_at ? new Date(r.run_at.getTime() + jitter) : null,
    ...(delayMs === null ? {} : { delay_ms: delayMs }),
    priority: r.priority,
    idempotency_key: r.idempotency_key ?? null,
    request_hash: r.request_hash,
    schedule_id: null,
    nominal_time: null,
    target: r.target,
    max_attempts: r.retry.max_attempts ?? defaults.maxAttempts,
    backoff_base_ms: r.retry.base ?? defaults.backoffBaseMs,
    backoff_max_ms: r.retry.max ?? defaults.backoffMaxMs,
    timeout_ms: r.timeout ?? defaults.timeoutMs,
    expires_at: r.expires_at ?? null,
    window_ms: r.window,
    async: r.async,
    host_limits: r.host_limits,
    verify_url: r.verify_url,
  };
}

/**
 * An occurrence of a schedule placed in time by the generator (epoch ms): the plan's
 * occurrence (dispatcher/occurrence-plan.ts), where the window spread it, when it is due.
 */
export interface PlacedOccurrence {
  nominal: number;
  /** A catch-up run (starts later than its grace after the nominal time). */
  late: boolean;
  graceMs: number;
  /** Must start within its grace or not at all (fire_once's on-time ones beside a catch-up). */
  strictStart?: boolean;
  /** nominal + the window's jitter (windowJitter): grace and start-by count from here. */
  spread: number;
  /** spread, or later: catch-up is released at a bounded rate. */
  due: number;
  /** Held until the occurrence before it finishes (overlap=queue; a trigger releases it). */
  heldBack: boolean;
}

/**
 * What every job of a schedule copies from it. The nominal time names the occurrence: the
 * key `<schedule_id>@<instant>` makes a second insert of one occurrence a no-op.
 */
function fromSchedule(s: ScheduleRow, nominal: Date) {
  return {
    id: Bun.randomUUIDv7(),
    tenant: s.tenant,
    priority: s.priority,
    idempotency_key: `${s.id}@${nominal.toISOString()}`,
    request_hash: null,
    schedule_id: s.id,
    nominal_time: nominal,
    target: s.target,
    max_attempts: s.max_attempts,
    // bigint columns read back as strings on both drivers.
    backoff_base_ms: s.backoff_base_ms,
    backoff_max_ms: s.backoff_max_ms,
    timeout_ms: s.timeout_ms,
    expires_at: null,
    async: s.async ?? false,
    host_limits: s.host_limits ?? null,
    verify_url: s.verify_url ?? null,
    // Only overlap=queue holds an occurrence back, so only its occurrences release one (029).
    releases_held: s.overlap === "queue",
  };
}

/**
 * A generated occurrence. A start spread late by its window is neither a catch-up nor a
 * misfire: grace and start-by count from the spread instant. It must start within its grace
 * (skip, or strictStart) or else within the catch-up window; a paced catch-up gets at least
 * its grace after the instant it is released.
 */
export function occurrenceJob(s: ScheduleRow, occ: PlacedOccurrence): NewJob {
  const startWithin = s.misfire === "skip" || occ.strictStart ? occ.graceMs : s.catchup_window_ms;
  return {
    ...fromSchedule(s, new Date(occ.nominal)),
    due_at: occ.heldBack ? "infinity" : new Date(occ.due),
    scheduled_for: new Date(occ.due),
    window_ms: s.window_ms,
    start_by: new Date(Math.max(occ.spread + startWithin, occ.late ? occ.due + occ.graceMs : 0)),
    catchup_after: new Date(occ.spread + occ.graceMs),
    catchup: occ.late,
  };
}

/**
 * A manual run of a schedule, outside its rule: nominal and due at `now` (the database's, read
 * in the inserting transaction), no window, no start-by; overlap does not apply.
 */
export function triggeredJob(s: ScheduleRow, now: Date): NewJob {
  // Read outside the inserting transaction: the schedule may turn to overlap=queue meanwhile,
  // and a held occurrence could then wait behind this run. A manual run is rare: always flagged.
  return { ...fromSchedule(s, now), due_at: now, window_ms: 0, releases_held: true };
}
