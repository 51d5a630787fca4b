/** Every API route with a valid request to start from; the fuzz mutates these. */
import { FUZZ_SECRET } from "./values.ts";

export interface Ids {
  job: string;
  schedule: string;
  dead: string;
}

export interface RouteCase {
  method: string;
  /** The route as the app declares it (for the census), ":id" filled from Ids. */
  route: string;
  id?: keyof Ids;
  body?: () => unknown;
  query?: Record<string, string>;
}

const HOOK = "https://hooks.example.com/fuzz";
const target = () => ({
  url: HOOK,
  method: "POST",
  headers: { authorization: `Bearer ${FUZZ_SECRET}`, "x-team": "billing" },
  body: { secret: FUZZ_SECRET, n: 1 },
});
const job = () => ({
  target: target(),
  delay: "1h",
  idempotency_key: `k-${Math.random().toString(36).slice(2)}`,
  priority: 0,
  retry: { max_attempts: 3, base: "1s", max: "10s" },
  timeout: "30s",
  window: "0ms",
  host_limits: { rate: 5, concurrency: 2 },
});
const schedule = () => ({
  id: `s-${Math.random().toString(36).slice(2)}`,
  cron: "0 9 * * *",
  timezone: "Europe/Berlin",
  target: target(),
  misfire: "skip",
  misfire_grace: "1h",
  overlap: "allow",
  max_queued: 5,
  window: "0ms",
  paused: false,
  dst: { gap: "shift", fold: "first" },
  start_at: "2026-12-01T00:00:00Z",
  end_at: null,
  retry: { max_attempts: 2 },
});

export const ROUTES: RouteCase[] = [
  { method: "POST", route: "/v1/jobs", body: job },
  { method: "POST", route: "/v1/jobs/batch", body: () => ({ jobs: [job(), { ...job(), run_at: "2030-01-01T00:00:00Z", delay: undefined }] }) },
  { method: "GET", route: "/v1/jobs/:id", id: "job" },
  {
    method: "GET",
    route: "/v1/jobs",
    query: {
      status: "scheduled",
      limit: "10",
      order: "desc",
      due_before: "2030-01-01T00:00:00Z",
      due_after: "2020-01-01T00:00:00Z",
      schedule_id: "x",
      tenant: "default",
      cursor: "",
    },
  },
  { method: "POST", route: "/v1/jobs/:id/cancel", id: "job", body: () => ({ reason: "fuzz", if_version: 1 }) },
  { method: "PATCH", route: "/v1/jobs/:id", id: "job", body: () => ({ delay: "2h", reason: "fuzz", if_version: 1 }) },
  {
    method: "POST",
    route: "/v1/jobs/:id/heartbeat",
    id: "job",
    body: () => ({ lease_token: "0190a5f4-3b1c-7d2e-8f00-000000000000.1", checkpoint: { page: 1 } }),
  },
  { method: "POST", route: "/v1/jobs/:id/complete", id: "job", body: () => ({ lease_token: "x", outcome: "succeeded", error: "e", retry_after: "1s" }) },
  { method: "POST", route: "/v1/schedules", body: schedule },
  { method: "GET", route: "/v1/schedules", query: { limit: "10", cursor: "", tenant: "default" } },
  { method: "GET", route: "/v1/schedules/:id", id: "schedule", query: { preview: "3" } },
  { method: "PATCH", route: "/v1/schedules/:id", id: "schedule", body: () => ({ cron: "0 10 * * *", timezone: "UTC", reason: "fuzz", paused: false }) },
  { method: "DELETE", route: "/v1/schedules/:id", id: "schedule" },
  { method: "POST", route: "/v1/schedules/:id/pause", id: "schedule", body: () => ({ reason: "fuzz" }) },
  { method: "POST", route: "/v1/schedules/:id/resume", id: "schedule", body: () => ({ reason: "fuzz" }) },
  { method: "POST", route: "/v1/schedules/:id/trigger", id: "schedule", body: () => ({ reason: "fuzz" }) },
  {
    method: "GET",
    route: "/v1/dlq",
    query: { limit: "5", tenant: "default", reason: "permanent", dead_after: "2020-01-01T00:00:00Z", quarantined: "false", cursor: "" },
  },
  { method: "POST", route: "/v1/dlq/:id/replay", id: "dead", body: () => ({ reason: "fuzz", force: false }) },
  {
    method: "POST",
    route: "/v1/dlq/replay",
    body: () => ({ filter: { reason: "permanent", dead_after: "2020-01-01T00:00:00Z" }, reason: "fuzz", dry_run: true, limit: 10, rate_per_sec: 5 }),
  },
  { method: "GET", route: "/v1/cluster" },
  // Never with force: a move to a region with no dispatcher would turn every later write into a 409.
  { method: "POST", route: "/v1/cluster/failover", body: () => ({ to: "nowhere", reason: "fuzz" }) },
  { method: "GET", route: "/v1/audit", query: { limit: "10", action: "dlq.", object_id: "x", tenant: "default", cursor: "" } },
  { method: "GET", route: "/v1/stats", query: { window: "300" } },
  { method: "POST", route: "/v1/signing-keys", body: () => ({ reason: "fuzz" }) },
  { method: "GET", route: "/v1/signing-keys", query: { limit: "10" } },
  // A job's id is no key's: the fuzz checks these routes answer in shape (404, 400), never 5xx.
  { method: "POST", route: "/v1/signing-keys/:id/rotate", id: "job", body: () => ({ overlap: "1h", reason: "fuzz" }) },
  { method: "POST", route: "/v1/signing-keys/:id/retire", id: "job", body: () => ({ reason: "fuzz" }) },
];
