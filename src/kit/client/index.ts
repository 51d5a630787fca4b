// scheduler/client: a typed client for the scheduler's HTTP API, its types generated from
// the served OpenAPI document (scripts/gen-client.ts). Runs on Bun and Node >= 20.
export {
  createClient,
  type ApiErrorBody,
  type AuditEntry,
  type BatchResult,
  type ClientOptions,
  type Cluster,
  type DeadJob,
  type Job,
  type JobInput,
  type JobListQuery,
  type Schedule,
  type ScheduleInput,
  type SchedulerClient,
  type SchedulePatch,
} from "./client.ts";
export { SchedulerApiError, SchedulerNetworkError } from "./errors.ts";
export { collect, paginate, type Page } from "./paginate.ts";
export type { RetryPolicy } from "./retry.ts";
export type { components, operations, paths } from "./openapi-types.ts";
