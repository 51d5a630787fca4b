import * as v from "valibot";
import { FailoverSchema } from "../cluster-routes.ts";
import { errors, json, WRITE_ERRORS, type RouteDoc } from "./route-doc.ts";
import { Cluster } from "./components.ts";

const Ok = v.object({ ok: v.boolean() });
const TEXT = "text/plain";

/** Health, metrics, the document itself, and the cluster. */
export const opsDocs: RouteDoc[] = [
  {
    method: "get", path: "/healthz", tag: "Operations", auth: "none",
    summary: "Liveness",
    responses: { 200: json(Ok, "The process serves HTTP.") },
  },
  {
    method: "get", path: "/readyz", tag: "Operations", auth: "none",
    summary: "Readiness: the database is reachable and migrated",
    responses: {
      200: json(v.object({ ok: v.literal(true), database: v.string() }), "Ready."),
      503: json(v.object({ ok: v.literal(false), database: v.string() }), "The database is unreachable or not migrated."),
    },
  },
  {
    method: "get", path: "/metrics", tag: "Operations", auth: "none",
    summary: "Prometheus metrics (text format), all prefixed scheduler_",
    responses: { 200: { description: "Prometheus text exposition format.", contentType: TEXT, schema: v.string() } },
  },
  {
    method: "get", path: "/openapi.json", tag: "Operations", auth: "none",
    summary: "This document (OpenAPI 3.1)",
    responses: { 200: json(v.object({ openapi: v.string() }), "The OpenAPI 3.1 document.") },
  },
  {
    method: "get", path: "/docs", tag: "Operations", auth: "none",
    summary: "The API reference as one HTML page (made from this document; no network needed)",
    responses: { 200: { description: "HTML.", contentType: "text/html", schema: v.string() } },
  },
  {
    method: "get", path: "/v1/cluster", tag: "Cluster", auth: "jobs:read",
    summary: "Regions, the fencing epoch and the dispatch leader",
    responses: { 200: json(Cluster, "The cluster as this process sees it."), ...errors(401, 403, 503) },
  },
  {
    method: "post", path: "/v1/cluster/failover", tag: "Cluster", auth: "admin",
    summary: "Move the home region (served in every region)",
    body: FailoverSchema,
    responses: {
      200: json(v.object({ failover: v.unknown(), cluster: Cluster }), "Moved; the new cluster view."),
      ...errors(...WRITE_ERRORS),
    },
  },
];
