import * as v from "valibot";
import { FailoverSchema } from "../cluster-routes.ts";
import { errors, json, WRITE_ERRORS, type RouteDoc } from "./route-doc.ts";
import { Cluster } from "./components.ts";

const Ok = v.object({ ok: v.boolean() });
const TEXT = "text/plain";

/** Health, metrics, the document itself, and the cluster. */
export const opsDocs: RouteDoc[] = [
  {
    method: "get",
    path: "/healthz",
    tag: "Operations",
    auth: "none",
    summary: "Liveness",
    responses: { 200: json(Ok, "The process serves HTTP.") },
  },
  {
    method: "get",
    path: "/readyz",
    tag: "Operations",
    auth: "none",
    summary: "Readiness: the database is reachable and migrated",
    responses: {
      200: json(v.object({ ok: v.literal(true), database: v.string() }), "Ready."),
      503: json(v.object({ ok: v.literal(false), database: v.string() }), "The database is unreachable or not migrated."),
    },
  },
  {
    method: "get",
    path: "/metrics",
    tag: "Operations",
    auth: "none",
    summary: "Prometheus metrics (text format), all prefixed scheduler_",
    responses: { 200: { description: "Prometheus text exposition format.", contentType: TEXT, schema: v.string() } },
  },
  {
    method: "get",
    path: "/openapi.json",
    tag: "Operations",
    auth: "none",
    summary: "This document (OpenAPI 3.1)",
    responses: { 200: json(v.object({ openapi: v.string() }), "The OpenAPI 3.1 document.") },
  },
  {
    method: "get",
    path: "/docs",
    tag: "Operations",
    auth: "none",
    summary: "The API reference as one HTML page (made from this document; no network needed)",
    responses: { 200: { description: "HTML.", contentType: "text/html", schema: v.string() } },
  },
  {
    method: "get",
    path: "/ui",
    tag: "Operations",
    auth: "none",
    summary: "The dashboard (api mode): one page that reads this API with the token pasted into it",
    description:
      "The page and its files need no token; its data calls (GET /v1/stats, /v1/jobs, /v1/jobs/{id}, /v1/dlq, /v1/schedules) and actions (cancel a job, replay a dead one, pause/resume a schedule) send the bearer token the user gives it. Nothing is fetched from anywhere else.",
    responses: { 200: { description: "HTML.", contentType: "text/html", schema: v.string() } },
  },
  {
    method: "get",
    path: "/ui/:file",
    tag: "Operations",
    auth: "none",
    params: { file: "One of the dashboard's files: app.js, style.css, …" },
    summary: "The dashboard's script and style files (ES modules, CSS)",
    responses: {
      200: { description: "JavaScript or CSS.", contentType: "text/javascript", schema: v.string() },
      ...errors(404),
    },
  },
  {
    method: "get",
    path: "/v1/cluster",
    tag: "Cluster",
    auth: "jobs:read",
    summary: "Regions, the fencing epoch and the dispatch leader",
    responses: { 200: json(Cluster, "The cluster as this process sees it."), ...errors(401, 403, 503) },
  },
  {
    method: "get",
    path: "/v1/stats",
    tag: "Operations",
    auth: "jobs:read",
    summary: "Health facts on one page (what the dashboard and `scheduler status` show)",
    description: "A tenant's token sees its own tenant's figures, without the cluster-wide history and per-tenant backlog.",
    query: v.object({
      window: v.optional(
        v.pipe(
          v.number(),
          v.integer(),
          v.minValue(10),
          v.maxValue(3600),
          v.description("Seconds of recent attempts for outcomes and start lag (default 300)."),
        ),
        300,
      ),
    }),
    responses: {
      200: json(
        v.object({
          at: v.string(),
          tenant: v.nullable(v.string()),
          jobs: v.record(v.string(), v.number()),
          due_backlog: v.number(),
          overdue: v.number(),
          oldest_due_age_seconds: v.number(),
          queue_depth: v.number(),
          dlq: v.object({ jobs: v.number(), oldest_age_seconds: v.number() }),
          recent: v.object({
            window_seconds: v.number(),
            by_outcome: v.record(v.string(), v.number()),
            start_lag: v.record(v.string(), v.nullable(v.number())),
            execution: v.record(v.string(), v.nullable(v.number())),
            lag_histogram: v.array(v.object({ le: v.nullable(v.number()), count: v.number() })),
          }),
          tenants_due_backlog: v.array(v.object({ tenant: v.string(), due_backlog: v.number() })),
          cluster: v.nullable(Cluster),
          history: v.array(
            v.object({
              at: v.string(),
              due_backlog: v.number(),
              queue_depth: v.number(),
              running: v.number(),
              dead: v.number(),
              finished: v.record(v.string(), v.number()),
            }),
          ),
        }),
        "The figures.",
      ),
      ...errors(400, 401, 403),
    },
  },
  {
    method: "post",
    path: "/v1/cluster/failover",
    tag: "Cluster",
    auth: "admin",
    summary:
      "Move the home region (served in every region). Needs an admin token for all tenants (`*`); 409 `failover_refused` when no dispatcher of `to` is alive, unless `force: true`",
    body: FailoverSchema,
    responses: {
      200: json(v.object({ failover: v.unknown(), cluster: Cluster }), "Moved; the new cluster view."),
      ...errors(...WRITE_ERRORS),
    },
  },
];
