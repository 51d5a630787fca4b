import * as v from "valibot";
import { BulkReplaySchema, ReplayOneSchema } from "../dlq-routes.ts";
import { DeadFilterSchema } from "../dlq-filter.ts";
import { errors, json, WRITE_ERRORS, type RouteDoc } from "./route-doc.ts";
import { pageQuery } from "./jobs-docs.ts";

const JOB_ID = { id: "The dead job's id (UUIDv7); a replay keeps it." };
const REFUSED = "Not replayable now: `schema_version_unsupported`, `payload_missing`, `expired` or `target_refused` (the message says why).";

/** Dead letters and the audit log (README "Dead letters and replay" and "Audit log"). */
export const dlqDocs: RouteDoc[] = [
  {
    method: "get",
    path: "/v1/dlq",
    tag: "Dead letters",
    auth: "jobs:read",
    summary: "List dead jobs, oldest death first",
    description: "Filters: the same fields as a bulk replay's `filter` (`reason` is a prefix of the failure signature, like `permanent` or `max_attempts:5`).",
    query: v.object({ ...pageQuery, ...DeadFilterSchema.entries }),
    responses: { 200: json("DeadJobPage", "Dead jobs with reason, dead_at, replays, quarantined."), ...errors(400, 401, 403) },
  },
  {
    method: "post",
    path: "/v1/dlq/:id/replay",
    tag: "Dead letters",
    auth: "admin",
    params: JOB_ID,
    summary: "Replay one dead job (same job id, a new attempt id, a full set of tries; audited)",
    description:
      "409 `quarantined` for a job that died the same way after SCHEDULER_DLQ_QUARANTINE_AFTER replays, unless `force: true`; 409 `not_dead` for a job that is not dead.",
    body: ReplayOneSchema,
    responses: { 200: json("Job", "The job, scheduled again, due now."), ...errors(...WRITE_ERRORS, 404), 422: json("Error", REFUSED) },
  },
  {
    method: "post",
    path: "/v1/dlq/replay",
    tag: "Dead letters",
    auth: "admin",
    summary: "Replay dead jobs in bulk, spread at rate_per_sec (capped by SCHEDULER_CATCHUP_RATE)",
    description:
      "Looks at up to `limit` dead jobs matching `filter`; `dry_run: true` changes nothing and answers what it would replay. Quarantined jobs are skipped unless `force: true`.",
    body: BulkReplaySchema,
    responses: {
      200: json(
        v.object({
          count: v.pipe(v.number(), v.integer()),
          job_ids: v.array(v.string()),
          skipped: v.array(v.object({ id: v.string(), code: v.string(), message: v.string() })),
          next_cursor: v.nullable(v.string()),
        }),
        "What was (or, in a dry run, would be) replayed, and what was skipped with why.",
      ),
      ...errors(...WRITE_ERRORS),
    },
  },
  {
    method: "get",
    path: "/v1/audit",
    tag: "Audit",
    auth: "admin",
    summary: "Who did what, when, why (newest first)",
    query: v.object({
      ...pageQuery,
      action: v.optional(v.pipe(v.string(), v.description("An action or its prefix, like `dlq.` or `job.cancelled`."))),
      object_id: v.optional(v.pipe(v.string(), v.description("Only entries about this object."))),
      tenant: v.optional(v.pipe(v.string(), v.description("Only for an all-tenant token: limit to this tenant."))),
    }),
    responses: { 200: json("AuditPage", "A page of audit entries."), ...errors(400, 401, 403) },
  },
];
