import * as v from "valibot";
import { JOB_STATUSES } from "../../store/types.ts";
import { instantField, JobInputSchema } from "../job-input.ts";
import { JobCancelSchema, JobRescheduleSchema, MAX_BATCH } from "../jobs-routes.ts";
import { errors, json, WRITE_ERRORS, type RouteDoc } from "./route-doc.ts";
import { ErrorBody, Job } from "./components.ts";

const JOB_ID = { id: "The job id (UUIDv7)." };

/** Paging of list routes: what src/api/request.ts queryInt accepts. */
export const pageQuery = {
  limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000), v.description("Items per page (default 100).")), 100),
  cursor: v.optional(v.pipe(v.string(), v.description("next_cursor of the previous page."))),
};
/** For a token that sees every tenant (tenant `*`): limit to one tenant. */
const tenantQuery = { tenant: v.optional(v.pipe(v.string(), v.description("Only for an all-tenant token: limit to this tenant."))) };

export const jobsDocs: RouteDoc[] = [
  {
    method: "post",
    path: "/v1/jobs",
    tag: "Jobs",
    auth: "jobs:write",
    summary: "Create a job",
    description:
      "`run_at` or `delay` (neither: now). `body` is sent as its JSON text, `body_text` byte-for-byte. " +
      "A repeated `idempotency_key` with the same request answers 200 with the first job; with a different request, 409.",
    body: JobInputSchema,
    responses: {
      201: json("Job", "The new job."),
      200: json("Job", "The same idempotency_key and the same request: the first job."),
      ...errors(...WRITE_ERRORS),
    },
  },
  {
    method: "post",
    path: "/v1/jobs/batch",
    tag: "Jobs",
    auth: "jobs:write",
    summary: "Create up to 1000 jobs",
    description: "Valid items are created even when others are invalid; the answer keeps the order of the request.",
    body: v.strictObject({ jobs: v.pipe(v.array(JobInputSchema), v.maxLength(MAX_BATCH)) }),
    responses: {
      200: json(v.object({ jobs: v.array(v.union([Job, ErrorBody])) }), "One entry per item: the job, or its error."),
      ...errors(...WRITE_ERRORS),
    },
  },
  {
    method: "get",
    path: "/v1/jobs",
    tag: "Jobs",
    auth: "jobs:read",
    summary: "List jobs",
    query: v.object({
      status: v.optional(v.picklist(JOB_STATUSES)),
      schedule_id: v.optional(v.pipe(v.string(), v.description("Occurrences of this schedule."))),
      due_before: v.optional(instantField),
      due_after: v.optional(instantField),
      order: v.optional(
        v.pipe(v.picklist(["asc", "desc"]), v.description("asc: oldest first (the default); desc: newest first. Pass the same order with the cursor.")),
        "asc",
      ),
      ...pageQuery,
      ...tenantQuery,
    }),
    responses: { 200: json("JobPage", "A page of jobs, oldest first (newest first with order=desc)."), ...errors(400, 401, 403) },
  },
  {
    method: "get",
    path: "/v1/jobs/:id",
    tag: "Jobs",
    auth: "jobs:read",
    params: JOB_ID,
    summary: "Get a job with its attempt history",
    responses: { 200: json("Job", "The job, with attempt_log."), ...errors(401, 403, 404) },
  },
  {
    method: "patch",
    path: "/v1/jobs/:id",
    tag: "Jobs",
    auth: "jobs:write",
    params: JOB_ID,
    summary: "Reschedule a job",
    description: "Give `run_at` or `delay`. Only scheduled or queued jobs; the version goes up by one.",
    body: JobRescheduleSchema,
    responses: { 200: json("Job", "The rescheduled job."), ...errors(...WRITE_ERRORS, 404) },
  },
  {
    method: "post",
    path: "/v1/jobs/:id/cancel",
    tag: "Jobs",
    auth: "jobs:write",
    params: JOB_ID,
    summary: "Cancel a job",
    description: "A running job gets `cancel_requested: true` (202) and ends `cancelled` when its worker stops. A finished job: 409.",
    body: JobCancelSchema,
    bodyOptional: true,
    responses: {
      200: json("Job", "Cancelled."),
      202: json("Job", "Running: cancel requested."),
      ...errors(...WRITE_ERRORS, 404),
    },
  },
];
