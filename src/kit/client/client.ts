import createFetchClient, { type Client } from "openapi-fetch";
import { apiErrorFrom } from "./errors.ts";
import type { components, operations, paths } from "./openapi-types.ts";
import { type Page, paginate } from "./paginate.ts";
import { once, retryOnNetworkError, type RetryPolicy } from "./retry.ts";

type Schemas = components["schemas"];
export type Job = Schemas["Job"];
export type JobInput = Schemas["JobInput"];
export type Schedule = Schemas["Schedule"];
export type ScheduleInput = Schemas["ScheduleInput"];
export type DeadJob = Schemas["DeadJob"];
export type AuditEntry = Schemas["AuditEntry"];
export type Cluster = Schemas["Cluster"];
export type ApiErrorBody = Schemas["Error"];

/** An operation's JSON request body and query, from the document. */
type JsonBody<Op> = Op extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;
type QueryOf<Op> = Op extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
type Ok<Op> = Op extends { responses: { 200: { content: { "application/json": infer R } } } } ? R : never;

export type JobListQuery = Omit<QueryOf<operations["getV1Jobs"]>, "cursor">;
export type ScheduleListQuery = Omit<QueryOf<operations["getV1Schedules"]>, "cursor">;
export type DlqListQuery = Omit<QueryOf<operations["getV1Dlq"]>, "cursor">;
export type AuditListQuery = Omit<QueryOf<operations["getV1Audit"]>, "cursor">;
export type SchedulePatch = JsonBody<operations["patchV1SchedulesId"]>;
export type JobCancel = JsonBody<operations["postV1JobsIdCancel"]>;
export type JobReschedule = JsonBody<operations["patchV1JobsId"]>;
export type BulkReplay = JsonBody<operations["postV1DlqReplay"]>;
export type BatchResult = Ok<operations["postV1JobsBatch"]>;
export type PreviewInstant = NonNullable<Schedule["preview"]>[number];

export interface ClientOptions {
  /** The scheduler's base URL, like "https://scheduler.example.com". */
  baseUrl: string;
  /** A bearer token (SCHEDULER_TOKENS); omit for a loopback scheduler without tokens. */
  token?: string;
  /** Retries of idempotent creates on network errors (default 5 tries, 200 ms base, 5 s cap); false: none. */
  retry?: RetryPolicy | false;
  /**
   * Creates without an idempotency_key get a random one, so that a retry after a network
   * error cannot create the job twice (default true). The target then receives it as its
   * Idempotency-Key instead of the job id.
   */
  autoIdempotencyKey?: boolean;
  fetch?: typeof fetch;
}

type Result<T> = { data?: T; error?: unknown; response: Response };

/** openapi-fetch's result → the data, or a thrown SchedulerApiError (code, message, path). */
async function unwrap<T>(p: Promise<Result<T>>): Promise<T> {
  const r = await p;
  if (r.error !== undefined || !r.response.ok) throw apiErrorFrom(r.error, r.response);
  return r.data as T;
}

const newKey = () => `client-${globalThis.crypto.randomUUID()}`;

/**
 * A typed client for the whole HTTP API. `raw` is the openapi-fetch client over the served
 * document's types (every route); the named methods wrap the common ones, throw
 * SchedulerApiError on an HTTP error and SchedulerNetworkError when no answer came, and retry
 * job creation on network errors (safe: each create carries an idempotency key).
 */
export function createClient(o: ClientOptions) {
  const raw: Client<paths> = createFetchClient<paths>({
    baseUrl: o.baseUrl.replace(/\/+$/, ""),
    headers: o.token ? { authorization: `Bearer ${o.token}` } : {},
    ...(o.fetch ? { fetch: (req: Request) => o.fetch!(req) } : {}),
  });
  const idempotent = <T>(send: () => Promise<T>) => (o.retry === false ? once(send) : retryOnNetworkError(send, o.retry));
  const autoKey = o.autoIdempotencyKey ?? true;
  const keyed = (j: JobInput): JobInput => (autoKey && !j.idempotency_key ? { ...j, idempotency_key: newKey() } : j);

  const jobs = {
    /** POST /v1/jobs: 201 new, 200 the first job of a repeated key; retried on network errors. */
    create: (input: JobInput): Promise<Job> => {
      const body = keyed(input);
      return idempotent(() => unwrap(raw.POST("/v1/jobs", { body })));
    },
    /** POST /v1/jobs/batch: each item a job or { error }; retried on network errors. */
    createBatch: (items: JobInput[]): Promise<BatchResult> => {
      const body = { jobs: items.map(keyed) };
      return idempotent(() => unwrap(raw.POST("/v1/jobs/batch", { body })));
    },
    /** GET /v1/jobs/:id, with its attempt_log. */
    get: (id: string): Promise<Job> => once(() => unwrap(raw.GET("/v1/jobs/{id}", { params: { path: { id } } }))),
    /** One page; pass next_cursor back as `cursor`. */
    list: (query: JobListQuery & { cursor?: string } = {}): Promise<Page<Job>> => once(() => unwrap(raw.GET("/v1/jobs", { params: { query } }))),
    /** Every job matching the query, fetched page by page as you iterate. */
    iterate: (query: JobListQuery = {}) => paginate((cursor) => jobs.list({ ...query, ...(cursor ? { cursor } : {}) })),
    /** 200 cancelled, or 202 with cancel_requested for a running job (the job is returned either way). */
    cancel: (id: string, body: JobCancel = {}): Promise<Job> => once(() => unwrap(raw.POST("/v1/jobs/{id}/cancel", { params: { path: { id } }, body }))),
    reschedule: (id: string, body: JobReschedule): Promise<Job> => once(() => unwrap(raw.PATCH("/v1/jobs/{id}", { params: { path: { id } }, body }))),
  };

  const schedules = {
    create: (input: ScheduleInput): Promise<Schedule> => once(() => unwrap(raw.POST("/v1/schedules", { body: input }))),
    get: (id: string, query: { preview?: number; tenant?: string } = {}): Promise<Schedule> =>
      once(() => unwrap(raw.GET("/v1/schedules/{id}", { params: { path: { id }, query } }))),
    /** The next n fire instants (n ≤ 1000), each with its UTC offset in `local`. */
    preview: async (id: string, n = 10): Promise<PreviewInstant[]> => (await schedules.get(id, { preview: n })).preview ?? [],
    list: (query: ScheduleListQuery & { cursor?: string } = {}): Promise<Page<Schedule>> => once(() => unwrap(raw.GET("/v1/schedules", { params: { query } }))),
    iterate: (query: ScheduleListQuery = {}) => paginate((cursor) => schedules.list({ ...query, ...(cursor ? { cursor } : {}) })),
    update: (id: string, patch: SchedulePatch): Promise<Schedule> =>
      once(() => unwrap(raw.PATCH("/v1/schedules/{id}", { params: { path: { id } }, body: patch }))),
    delete: (id: string) => once(() => unwrap(raw.DELETE("/v1/schedules/{id}", { params: { path: { id } } }))),
    pause: (id: string, reason?: string): Promise<Schedule> =>
      once(() => unwrap(raw.POST("/v1/schedules/{id}/pause", { params: { path: { id } }, body: reason ? { reason } : {} }))),
    resume: (id: string, reason?: string): Promise<Schedule> =>
      once(() => unwrap(raw.POST("/v1/schedules/{id}/resume", { params: { path: { id } }, body: reason ? { reason } : {} }))),
    trigger: (id: string, reason?: string): Promise<Job> =>
      once(() => unwrap(raw.POST("/v1/schedules/{id}/trigger", { params: { path: { id } }, body: reason ? { reason } : {} }))),
  };

  const dlq = {
    list: (query: DlqListQuery & { cursor?: string } = {}): Promise<Page<DeadJob>> => once(() => unwrap(raw.GET("/v1/dlq", { params: { query } }))),
    iterate: (query: DlqListQuery = {}) => paginate((cursor) => dlq.list({ ...query, ...(cursor ? { cursor } : {}) })),
    /** Replays one dead job (admin): same job id, a new attempt. */
    replay: (id: string, body: { reason: string; force?: boolean }) => once(() => unwrap(raw.POST("/v1/dlq/{id}/replay", { params: { path: { id } }, body }))),
    /** Bulk replay by filter (admin), rate-limited; `dry_run` answers what it would replay. */
    replayMany: (body: BulkReplay) => once(() => unwrap(raw.POST("/v1/dlq/replay", { body }))),
  };

  const audit = {
    list: (query: AuditListQuery & { cursor?: string } = {}): Promise<Page<AuditEntry>> => once(() => unwrap(raw.GET("/v1/audit", { params: { query } }))),
    iterate: (query: AuditListQuery = {}) => paginate((cursor) => audit.list({ ...query, ...(cursor ? { cursor } : {}) })),
  };

  const cluster = {
    get: (): Promise<Cluster> => once(() => unwrap(raw.GET("/v1/cluster"))),
  };

  return { raw, jobs, schedules, dlq, audit, cluster };
}

export type SchedulerClient = ReturnType<typeof createClient>;
