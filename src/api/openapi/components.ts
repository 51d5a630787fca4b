import * as v from "valibot";
import { JOB_STATUSES } from "../../store/types.ts";
import { HostLimitsSchema, JobInputSchema, RetrySchema, TargetSchema } from "../job-input.ts";
import { ScheduleCreateSchema } from "../schedule-input.ts";

// What the API answers, as valibot schemas: the document turns them into
// components.schemas, and test/api/openapi.test.ts checks real answers against them.
// v.object (not strict): adding a field to a view does not make the document wrong.

const instant = v.pipe(v.string(), v.isoTimestamp(), v.description("RFC 3339 instant, UTC."));
const maybeInstant = v.nullable(instant);
const duration = v.pipe(v.string(), v.description('A duration as the API writes it: "250ms", "30s", "1m30s".'));
const int = v.pipe(v.number(), v.integer());

export const ErrorBody = v.pipe(
  v.strictObject({
    error: v.strictObject({
      code: v.pipe(
        v.string(),
        v.description("Stable, machine-readable: invalid_request, unauthorized, forbidden, not_found, idempotency_conflict, version_mismatch, …"),
      ),
      message: v.pipe(v.string(), v.description("For people; never echoes the request.")),
      path: v.optional(v.pipe(v.string(), v.description('The field at fault, like "target.url" or "jobs.3.delay".'))),
    }),
  }),
  v.description("Every HTTP error has this one shape."),
);

export const TargetView = v.object({
  url: v.string(),
  method: v.string(),
  headers: v.record(v.string(), v.string()),
  body: v.optional(v.pipe(v.unknown(), v.description("The JSON body, when the job was given `body`."))),
  body_text: v.optional(v.pipe(v.string(), v.description("The body sent byte-for-byte, when the job was given `body_text`."))),
});

const RetryView = v.object({ max_attempts: int, base: duration, max: duration });
const VerifyView = v.nullable(v.object({ url: v.string() }));
const HostLimitsView = v.nullable(v.object({ rate: v.nullable(v.number()), concurrency: v.nullable(int) }));

export const Attempt = v.object({
  attempt_id: v.string(),
  number: int,
  started_at: maybeInstant,
  finished_at: maybeInstant,
  outcome: v.pipe(
    v.string(),
    v.description("success, throttled, transient, unknown, permanent; lost when the worker's lease lapsed before it reported; in_flight while the call runs."),
  ),
  http_status: v.nullable(int),
  error: v.nullable(v.string()),
  possibly_delivered: v.boolean(),
  verified: v.pipe(
    v.boolean(),
    v.description(
      "Verify before retry: the target's verify URL said this possibly delivered call was processed; the job ended succeeded without another call.",
    ),
  ),
  late_outcome: v.nullable(
    v.pipe(
      v.string(),
      v.description(
        "A lost call whose worker reported after all: its real outcome. The attempt stays lost (that verdict decided the job then), except that a late success revives a job the reap had left dead.",
      ),
    ),
  ),
  late_http_status: v.nullable(int),
  late_at: maybeInstant,
  epoch: v.nullable(v.pipe(int, v.description("The fencing token the call carried."))),
  worker: v.string(),
});

const jobEntries = {
  id: v.pipe(v.string(), v.uuid(), v.description("UUIDv7.")),
  tenant: v.string(),
  status: v.picklist(JOB_STATUSES),
  due_at: v.nullable(v.pipe(instant, v.description("null while an occurrence waits for the previous one (overlap: queue)."))),
  waiting_for_previous: v.optional(v.boolean()),
  catchup: v.optional(v.boolean()),
  scheduled_for: maybeInstant,
  version: int,
  attempts: v.pipe(int, v.description("Calls made so far (throttled ones too).")),
  idempotency_key: v.nullable(v.string()),
  schedule_id: v.nullable(v.string()),
  nominal_time: maybeInstant,
  target: TargetView,
  priority: int,
  retry: RetryView,
  timeout: duration,
  expires_at: maybeInstant,
  window: duration,
  host_limits: HostLimitsView,
  async: v.boolean(),
  verify: VerifyView,
  cancel_requested: v.boolean(),
  epoch: v.nullable(int),
  dead_reason: v.nullable(v.string()),
  created_at: instant,
  updated_at: instant,
  finished_at: maybeInstant,
  last_error: v.nullable(v.string()),
  attempt_log: v.optional(v.pipe(v.array(Attempt), v.description("On GET /v1/jobs/{id} only."))),
};
export const Job = v.object(jobEntries);

export const Schedule = v.object({
  id: v.string(),
  tenant: v.string(),
  cron: v.string(),
  timezone: v.string(),
  dst: v.object({ gap: v.nullable(v.picklist(["shift", "skip"])), fold: v.nullable(v.picklist(["first", "last", "both"])) }),
  target: TargetView,
  retry: RetryView,
  timeout: duration,
  priority: int,
  misfire: v.picklist(["skip", "fire_once", "fire_all"]),
  misfire_grace: v.nullable(duration),
  catchup_window: duration,
  overlap: v.picklist(["allow", "skip", "queue"]),
  max_queued: int,
  window: duration,
  host_limits: HostLimitsView,
  verify: VerifyView,
  paused: v.boolean(),
  paused_reason: v.nullable(v.string()),
  start_at: maybeInstant,
  end_at: maybeInstant,
  next_fire_at: maybeInstant,
  next_fire_local: v.nullable(v.pipe(v.string(), v.description("next_fire_at in the schedule's zone, with its UTC offset."))),
  last_nominal_at: maybeInstant,
  occurrences: v.object({ generated: int, skipped: int, misfired: int }),
  last_skip_at: maybeInstant,
  last_skip_reason: v.nullable(v.string()),
  version: int,
  created_at: instant,
  updated_at: instant,
  preview: v.optional(
    v.pipe(
      v.array(v.object({ at: instant, local: v.pipe(v.string(), v.description("The same instant in the schedule's zone, with its UTC offset.")) })),
      v.description("GET /v1/schedules/{id}?preview=N only: the next N fire instants."),
    ),
  ),
  preview_truncated: v.optional(
    v.pipe(
      v.literal(true),
      v.description(
        "The preview stopped with fewer than N instants: at instants more than 10 years after its start (or, as a safety net, after 2 s of computing).",
      ),
    ),
  ),
});

export const Cluster = v.object({
  region: v.string(),
  home_region: v.string(),
  epoch: v.pipe(int, v.description("The fencing token of the current dispatch leader.")),
  generation: int,
  role: v.picklist(["home", "standby"]),
  leader: v.nullable(v.string()),
  lease_until: instant,
  holder: v.nullable(v.string()),
  auto_failover: v.boolean(),
  takeover_after: maybeInstant,
  changed_at: instant,
});

export const DeadJob = v.object({
  ...jobEntries,
  reason: v.nullable(v.string()),
  dead_at: maybeInstant,
  replays: int,
  quarantined: v.boolean(),
});

export const AuditEntry = v.object({
  id: v.union([v.string(), int]),
  at: instant,
  actor: v.string(),
  tenant: v.nullable(v.string()),
  action: v.pipe(v.string(), v.description("Like job.cancelled, schedule.paused, dlq.replayed, cluster.failover.")),
  object_id: v.nullable(v.string()),
  reason: v.nullable(v.string()),
  details: v.nullable(v.unknown()),
});

export const SigningKeyView = v.object({
  id: v.string(),
  tenant: v.string(),
  schedule_id: v.pipe(v.nullable(v.string()), v.description("Null: the tenant's own key; else the schedule whose calls it signs.")),
  created_at: v.string(),
  status: v.picklist(["active", "retired"]),
  retires_at: v.pipe(v.nullable(v.string()), v.description("An active key being rotated out: when it stops signing.")),
  retired_at: v.nullable(v.string()),
  replaces: v.pipe(v.nullable(v.string()), v.description("The key this one was rotated in for.")),
});

const page = <T extends v.GenericSchema>(item: T) =>
  v.object({
    items: v.array(item),
    next_cursor: v.pipe(v.nullable(v.string()), v.description("Pass as ?cursor= for the next page; null on the last page.")),
  });

/**
 * Every named schema of the document. A valibot schema object listed here appears once, in
 * components.schemas, and as a $ref wherever a route or another component uses it.
 */
export const COMPONENTS = {
  Error: ErrorBody,
  Job: Job,
  JobPage: page(Job),
  Attempt,
  Schedule,
  SchedulePage: page(Schedule),
  Cluster,
  DeadJob,
  DeadJobPage: page(DeadJob),
  AuditEntry,
  AuditPage: page(AuditEntry),
  SigningKey: SigningKeyView,
  SigningKeyList: v.object({ items: v.array(SigningKeyView) }),
  // Requests, and their parts shared by jobs and schedules: the very schemas the routes
  // validate with.
  JobInput: JobInputSchema,
  ScheduleInput: ScheduleCreateSchema,
  Target: TargetSchema,
  Retry: RetrySchema,
  HostLimits: HostLimitsSchema,
} satisfies Record<string, v.GenericSchema>;

export type ComponentName = keyof typeof COMPONENTS;
