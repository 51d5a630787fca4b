import * as v from "valibot";
import { durationField } from "../job-input.ts";
import { errors, json, WRITE_ERRORS, type RouteDoc } from "./route-doc.ts";
import { pageQuery } from "./jobs-docs.ts";

// Routes that other branches add (dead letters, audit, async callbacks), documented from
// API.md ahead of their code. PROVISIONAL schemas: when a route lands, import its own
// valibot schema here instead of the one below (or move its entry next to its area's
// docs), and drop it from COMING_FROM_OTHER_BRANCHES in test/api/openapi.test.ts.

const JOB_ID = { id: "The job id (UUIDv7)." };

const DlqReplayOne = v.strictObject({
  reason: v.pipe(v.string(), v.minLength(1), v.maxLength(1000), v.description("Why: kept in the audit log.")),
  force: v.optional(v.pipe(v.boolean(), v.description("Replay a quarantined job anyway."))),
});

const DlqReplayBulk = v.strictObject({
  filter: v.pipe(v.record(v.string(), v.unknown()), v.description("Which dead jobs, like { \"dead_reason\": …, \"schedule_id\": …, \"dead_after\": … }.")),
  rate_per_sec: v.pipe(v.number(), v.minValue(0.001), v.description("Replays per second.")),
  reason: v.pipe(v.string(), v.minLength(1), v.maxLength(1000)),
  dry_run: v.optional(v.pipe(v.boolean(), v.description("Change nothing; answer what would be replayed."))),
  force: v.optional(v.boolean()),
});

const Heartbeat = v.strictObject({
  lease_token: v.pipe(v.string(), v.description("The Scheduler-Lease-Token header of the call.")),
  checkpoint: v.optional(v.pipe(v.unknown(), v.description("Progress to keep with the job."))),
});

const Complete = v.strictObject({
  lease_token: v.string(),
  outcome: v.picklist(["succeeded", "failed"]),
  error: v.optional(v.string()),
  retry_after: v.optional(durationField(86_400_000)),
});

const STALE = "A stale lease token: nothing changed.";

export const upcomingDocs: RouteDoc[] = [
  {
    method: "get", path: "/v1/dlq", tag: "Dead letters", auth: "jobs:read",
    summary: "List dead jobs",
    query: v.object({ ...pageQuery }),
    responses: { 200: json("DeadJobPage", "Dead jobs with reason, dead_at, replays, quarantined."), ...errors(400, 401, 403) },
  },
  {
    method: "post", path: "/v1/dlq/:id/replay", tag: "Dead letters", auth: "admin", params: JOB_ID,
    summary: "Replay one dead job (same job id, new attempt id; audited)",
    body: DlqReplayOne,
    responses: { 200: json("Job", "The job, scheduled again."), ...errors(...WRITE_ERRORS, 404) },
  },
  {
    method: "post", path: "/v1/dlq/replay", tag: "Dead letters", auth: "admin",
    summary: "Replay dead jobs in bulk, rate-limited",
    description: "A job that died the same way after 3 replays is quarantined: 409 unless `force: true`.",
    body: DlqReplayBulk,
    responses: {
      200: json(v.object({ count: v.pipe(v.number(), v.integer()), job_ids: v.array(v.string()), dry_run: v.optional(v.boolean()) }), "What was (or, dry run, would be) replayed."),
      ...errors(...WRITE_ERRORS),
    },
  },
  {
    method: "get", path: "/v1/audit", tag: "Audit", auth: "admin",
    summary: "Who did what, when, why",
    query: v.object({ ...pageQuery }),
    responses: { 200: json("AuditPage", "A page of audit entries, newest first."), ...errors(400, 401, 403) },
  },
  {
    method: "post", path: "/v1/jobs/:id/heartbeat", tag: "Async jobs", auth: "jobs:write", params: JOB_ID,
    summary: "Extend an async job's lease while its target works",
    body: Heartbeat,
    responses: {
      200: json(v.object({ lease_until: v.pipe(v.string(), v.isoTimestamp()), cancel_requested: v.boolean() }), "The new lease end."),
      ...errors(400, 401, 403, 404, 413),
      409: json("Error", STALE),
    },
  },
  {
    method: "post", path: "/v1/jobs/:id/complete", tag: "Async jobs", auth: "jobs:write", params: JOB_ID,
    summary: "Report an async job's outcome",
    body: Complete,
    responses: {
      200: json("Job", "The job after the outcome."),
      ...errors(400, 401, 403, 404, 413),
      409: json("Error", STALE),
    },
  },
];
