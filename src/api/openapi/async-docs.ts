import * as v from "valibot";
import { CompleteSchema, HeartbeatSchema } from "../async-routes.ts";
import { errors, json, type RouteDoc } from "./route-doc.ts";

const JOB_ID = { id: "The async job's id." };
const STALE = "A stale lease token (an older attempt, or the job ended: `stale_lease`) or past the execution ceiling (`timed_out`): nothing changed.";
const BAD_TOKEN = "Not a lease token of this job (`invalid_lease_token`).";

/**
 * Callbacks of an async job's target. The lease token in the body (the call's
 * Scheduler-Lease-Token header) is the credential: no bearer token.
 */
export const asyncDocs: RouteDoc[] = [
  {
    method: "post",
    path: "/v1/jobs/:id/heartbeat",
    tag: "Async jobs",
    auth: "none",
    params: JOB_ID,
    summary: "Renew an async job's lease while its target works; optionally store a checkpoint",
    body: HeartbeatSchema,
    responses: {
      200: json(
        v.object({ lease_until: v.string(), cancel_requested: v.boolean(), deadline_at: v.nullable(v.string()) }),
        "The new lease end; cancel_requested asks the target to stop.",
      ),
      ...errors(400, 404, 413),
      401: json("Error", BAD_TOKEN),
      409: json("Error", STALE),
    },
  },
  {
    method: "post",
    path: "/v1/jobs/:id/complete",
    tag: "Async jobs",
    auth: "none",
    params: JOB_ID,
    summary: "Report an async job's outcome",
    body: CompleteSchema,
    responses: {
      200: json("Job", "The job after the outcome."),
      ...errors(400, 404, 413),
      401: json("Error", BAD_TOKEN),
      409: json("Error", STALE),
    },
  },
];
