import * as v from "valibot";
import { ScheduleCreateSchema, SchedulePatchSchema } from "../schedule-input.ts";
import { MAX_PREVIEW, ScheduleActionSchema, ScheduleTriggerSchema } from "../schedules-routes.ts";
import { errors, json, WRITE_ERRORS, type RouteDoc } from "./route-doc.ts";
import { pageQuery } from "./jobs-docs.ts";

const SCHEDULE_ID = { id: "The schedule id (given at creation, or sch_<uuid>)." };
/** Schedules live in one tenant: the token's, or for an all-tenant token ?tenant= (default "default"). */
const tenantOf = v.object({
  tenant: v.optional(v.pipe(v.string(), v.description('Only for an all-tenant token: the schedule\'s tenant (default "default").'))),
});

export const schedulesDocs: RouteDoc[] = [
  {
    method: "post",
    path: "/v1/schedules",
    tag: "Schedules",
    auth: "jobs:write",
    summary: "Create a recurring schedule",
    description:
      "A bad cron expression or time zone answers 400 naming the field, and so does a rule that fires more often than SCHEDULER_MIN_SCHEDULE_INTERVAL (10 s by default: the shortest gap among its next 32 instants). A tenant has at most SCHEDULER_TENANT_MAX_SCHEDULES schedules (1000 by default; 409 `schedule_quota_exceeded`). Each occurrence is a job with `schedule_id` and `nominal_time`.",
    body: ScheduleCreateSchema,
    responses: { 201: json("Schedule", "The new schedule, with next_fire_at and version."), ...errors(...WRITE_ERRORS) },
  },
  {
    method: "get",
    path: "/v1/schedules",
    tag: "Schedules",
    auth: "jobs:read",
    summary: "List schedules",
    query: v.object({ ...pageQuery, ...tenantOf.entries }),
    responses: { 200: json("SchedulePage", "A page of schedules."), ...errors(400, 401, 403) },
  },
  {
    method: "get",
    path: "/v1/schedules/:id",
    tag: "Schedules",
    auth: "jobs:read",
    params: SCHEDULE_ID,
    summary: "Get a schedule, optionally with its next fire instants",
    query: v.object({
      preview: v.optional(
        v.pipe(
          v.number(),
          v.integer(),
          v.minValue(0),
          v.maxValue(MAX_PREVIEW),
          v.description(
            `Add the next N fire instants (at most ${MAX_PREVIEW}) from max(now, start_at). Instants more than 10 years out are not computed: then fewer come, with \`preview_truncated: true\`.`,
          ),
        ),
      ),
      ...tenantOf.entries,
    }),
    responses: { 200: json("Schedule", "The schedule (with `preview` when asked)."), ...errors(400, 401, 403, 404) },
  },
  {
    method: "patch",
    path: "/v1/schedules/:id",
    tag: "Schedules",
    auth: "jobs:write",
    params: SCHEDULE_ID,
    summary: "Change a schedule",
    description: "Only the fields given change. With `if_version`, 409 unless the schedule is at that version.",
    query: tenantOf,
    body: SchedulePatchSchema,
    responses: { 200: json("Schedule", "The changed schedule."), ...errors(...WRITE_ERRORS, 404) },
  },
  {
    method: "delete",
    path: "/v1/schedules/:id",
    tag: "Schedules",
    auth: "jobs:write",
    params: SCHEDULE_ID,
    summary: "Delete a schedule and cancel its pending occurrences",
    query: v.object({ reason: v.optional(v.pipe(v.string(), v.description("Kept in the audit log."))), ...tenantOf.entries }),
    responses: {
      200: json(v.object({ id: v.string(), tenant: v.string(), deleted: v.literal(true), cancelled_occurrences: v.pipe(v.number(), v.integer()) }), "Deleted."),
      ...errors(401, 403, 404, 409),
    },
  },
  ...(["pause", "resume"] as const).map(
    (action): RouteDoc => ({
      method: "post",
      path: `/v1/schedules/:id/${action}`,
      tag: "Schedules",
      auth: "jobs:write",
      params: SCHEDULE_ID,
      summary: action === "pause" ? "Pause a schedule" : "Resume a schedule",
      description: action === "resume" ? "What the pause missed is decided by the schedule's misfire policy." : undefined,
      query: tenantOf,
      body: ScheduleActionSchema,
      bodyOptional: true,
      responses: { 200: json("Schedule", "The schedule."), ...errors(...WRITE_ERRORS, 404) },
    }),
  ),
  {
    method: "post",
    path: "/v1/schedules/:id/trigger",
    tag: "Schedules",
    auth: "jobs:write",
    params: SCHEDULE_ID,
    summary: "Run a schedule now, outside its rule",
    query: tenantOf,
    body: ScheduleTriggerSchema,
    bodyOptional: true,
    responses: { 201: json("Job", "The new occurrence (nominal time: now)."), ...errors(...WRITE_ERRORS, 404) },
  },
];
