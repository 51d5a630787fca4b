import type { AttemptRow, HostLimits, JobRow, Target } from "../store/types.ts";
import { BoundedMap } from "../bounded-map.ts";
import { formatDuration } from "../time/duration.ts";

// 'infinity' (a held occurrence's due_at) arrives as an Invalid Date from postgres.js and
// as the number Infinity from PGlite: both show as null.
// The last instant formatted, kept: a batch's jobs share their created_at (= updated_at) and
// often their due time, and toISOString was ~4 % of the API's samples in a batch create.
let lastMs = Number.NaN;
let lastIso = "";
const iso = (d: Date | number | null) => {
  if (!(d instanceof Date)) return null;
  const ms = d.getTime();
  if (!Number.isFinite(ms)) return null;
  if (ms !== lastMs) {
    lastIso = d.toISOString();
    lastMs = ms;
  }
  return lastIso;
};
const held = (d: Date | number) => !(d instanceof Date && Number.isFinite(d.getTime()));
// A job view formats four durations, and a batch's jobs mostly share the same few values.
const durations = new BoundedMap<number, string>(1024);
const duration = (ms: number) => durations.getOrMake(ms, formatDuration);

/**
 * The target as given. A body stored apart shows as body_ref + body_size, and also as body /
 * body_text when `stored` (its text, loaded by the caller) is given.
 */
export function targetView(t: Target, stored?: string) {
  const target: Record<string, unknown> = { url: t.url, method: t.method, headers: t.headers };
  const body = t.body ?? stored ?? null;
  if (body !== null) {
    if (t.json) target.body = JSON.parse(body);
    else target.body_text = body;
  }
  if (t.body_ref) {
    target.body_ref = t.body_ref;
    target.body_size = t.body_size ?? null;
  }
  return target;
}

/** host_limits in a job or schedule: null, or both keys (null for one not given). */
export function hostLimitsView(l: HostLimits | null | undefined) {
  if (!l) return null;
  return { rate: l.rate ?? null, concurrency: l.concurrency ?? null };
}

/** The job object (README "The HTTP API", and the OpenAPI document at /openapi.json), snake_case; `storedBody`: the text of a body stored apart. */
export function jobView(j: JobRow, attempts?: AttemptRow[], storedBody?: string) {
  const target = targetView(j.target, storedBody);
  return {
    id: j.id,
    tenant: j.tenant,
    status: j.status,
    due_at: iso(j.due_at),
    ...(j.schedule_id ? { waiting_for_previous: j.status === "scheduled" && held(j.due_at), catchup: j.catchup } : {}),
    scheduled_for: iso(j.scheduled_for),
    version: j.version,
    attempts: j.calls,
    idempotency_key: j.idempotency_key,
    schedule_id: j.schedule_id,
    nominal_time: iso(j.nominal_time),
    target,
    priority: j.priority,
    retry: { max_attempts: j.max_attempts, base: duration(j.backoff_base_ms), max: duration(j.backoff_max_ms) },
    timeout: duration(j.timeout_ms),
    expires_at: iso(j.expires_at),
    window: duration(j.window_ms),
    host_limits: hostLimitsView(j.host_limits),
    async: j.async,
    verify: j.verify_url ? { url: j.verify_url } : null,
    // Async jobs: the last checkpoint their target stored (sent back to the next attempt).
    ...(j.async ? { checkpoint: j.checkpoint === null ? null : JSON.parse(j.checkpoint) } : {}),
    cancel_requested: j.cancel_requested,
    epoch: j.epoch,
    dead_reason: j.dead_reason,
    // Times taken out of the dead-letter queue (the id stays; see GET /v1/dlq).
    replays: j.replays,
    created_at: iso(j.created_at),
    updated_at: iso(j.updated_at),
    finished_at: iso(j.finished_at),
    last_error: j.last_error,
    ...(attempts ? { attempt_log: attempts.map(attemptView) } : {}),
  };
}

export function attemptView(a: AttemptRow) {
  return {
    attempt_id: a.id,
    number: a.number,
    started_at: iso(a.started_at),
    finished_at: iso(a.finished_at),
    outcome: a.outcome ?? "in_flight",
    http_status: a.http_status,
    error: a.error,
    possibly_delivered: a.possibly_delivered,
    // Verify before retry: the target said it processed this call, so none followed.
    verified: a.verified ?? false,
    // A call recorded lost whose worker reported later: what it really did (null otherwise).
    late_outcome: a.late_outcome ?? null,
    late_http_status: a.late_http_status ?? null,
    late_at: iso(a.late_at ?? null),
    epoch: a.epoch,
    worker: a.worker,
  };
}
