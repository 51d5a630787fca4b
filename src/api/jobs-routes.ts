import { Hono, type Context } from "hono";
import * as v from "valibot";
import type { Config } from "../config.ts";
import type { Db } from "../store/db.ts";
import { cancelJob, getJob, insertJobs, listAttempts, listJobs, rescheduleJob, transactionNow, type NewJob } from "../store/jobs.ts";
import { newJob } from "../store/new-job.ts";
import { externalize, loadPayload, type Payload } from "../store/payloads.ts";
import { JOB_STATUSES, TERMINAL } from "../store/types.ts";
import { type AppEnv, requireScope, tenantFilter, tenantForCreate, type Principal } from "./auth.ts";
import { ApiError, badRequest, conflict, notFound } from "./errors.ts";
import { checkTimeout, instantField, JobInputSchema, parseOrThrow, requestHash, toHostLimits, toTarget } from "./job-input.ts";
import { jobView } from "./job-view.ts";
import { IF_VERSION, queryInt as int, readJson, REASON } from "./request.ts";
import { checkTarget } from "./target-check.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const MAX_BATCH = 1000;

// Exported for the OpenAPI document (src/api/openapi/), which documents these very schemas.
export const JobCancelSchema = v.strictObject({ if_version: IF_VERSION, reason: REASON });
export const JobRescheduleSchema = v.strictObject({
  run_at: v.optional(instantField),
  delay: v.optional(JobInputSchema.entries.delay.wrapped),
  if_version: IF_VERSION,
  reason: REASON,
});

export interface JobsRoutesDeps {
  db: Db;
  config: Pick<Config, "allowPrivateTargets" | "jobDefaults" | "payloadInlineMax">;
}

interface Prepared {
  job: NewJob;
  /** The body, when it is large enough to be stored apart from the row. */
  payload?: Payload;
}

export function jobsRoutes(deps: JobsRoutesDeps) {
  const { db, config } = deps;
  const app = new Hono<AppEnv>();
  const principal = (c: Context<AppEnv>): Principal => c.get("principal");
  /** The database's now (epoch ms), asked at most once by whoever holds the function. */
  const dbClockOnce = () => {
    let at: Promise<number> | undefined;
    return () => (at ??= transactionNow(db).then((d) => d.getTime()));
  };

  /**
   * Validates one item and turns it into a row to insert; throws ApiError with the path.
   * `dbNow`: the database's clock, read once per request and only when a check needs it.
   */
  const prepare = async (
    raw: unknown,
    p: Principal,
    prefix = "",
    dns = new Map<string, Promise<string | null>>(),
    dbNow = dbClockOnce(),
  ): Promise<Prepared> => {
    if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw badRequest(`${prefix || "body"} must be a JSON object`, prefix || "body");
    const input = parseOrThrow(JobInputSchema, raw, prefix);
    const at = (f: string) => (prefix ? `${prefix}.${f}` : f);
    if (input.run_at && input.delay !== undefined) throw badRequest("give run_at or delay, not both", at("delay"));
    checkTimeout(input.async, input.timeout, at("timeout"));
    const { target, payload } = externalize(toTarget(input.target, prefix), config.payloadInlineMax);
    if (!config.allowPrivateTargets) await checkTarget(target.url, at("target.url"), dns);
    // The verify URL is called like a target: no private addresses unless allowed.
    if (!config.allowPrivateTargets && input.verify) await checkTarget(input.verify.url, at("verify.url"), dns);
    if (input.expires_at) {
      const base = input.run_at ? input.run_at.getTime() : (await dbNow()) + (input.delay ?? 0);
      if (input.expires_at.getTime() <= base) throw badRequest("expires_at must be after the due time", at("expires_at"));
    }
    const job = newJob(
      {
        ...input,
        tenant: tenantForCreate(p, input.tenant),
        target,
        request_hash: input.idempotency_key ? requestHash(raw) : null,
        host_limits: toHostLimits(input.host_limits),
        verify_url: input.verify?.url ?? null,
      },
      config.jobDefaults,
    );
    if (job.backoff_max_ms < job.backoff_base_ms) throw badRequest("retry.max must not be below retry.base", at("retry.max"));
    return { job, payload };
  };

  app.post("/jobs", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:write");
    const raw = await readJson(c);
    const { job, payload } = await prepare(raw, p);
    const [r] = await insertJobs(db, [job], payload ? [payload] : []);
    if (r.kind === "conflict")
      throw conflict("idempotency_conflict", `idempotency_key ${job.idempotency_key} was used with a different request (job ${r.job.id})`);
    return c.json(jobView(r.job), r.kind === "created" ? 201 : 200);
  });

  app.post("/jobs/batch", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:write");
    const raw = await readJson(c);
    const list = (raw as { jobs?: unknown })?.jobs;
    if (!Array.isArray(list)) throw badRequest("jobs must be an array of job objects", "jobs");
    if (list.length > MAX_BATCH) throw badRequest(`jobs may hold at most ${MAX_BATCH} items`, "jobs");
    const dns = new Map<string, Promise<string | null>>();
    const dbNow = dbClockOnce();
    const prepared = await Promise.all(
      list.map((item, i) =>
        prepare(item, p, `jobs.${i}`, dns, dbNow).then(
          (x) => x,
          (err: unknown) => {
            if (err instanceof ApiError) return { error: err };
            throw err;
          },
        ),
      ),
    );
    const valid = prepared.flatMap((x) => ("job" in x ? [x.job] : []));
    const payloads = prepared.flatMap((x) => ("payload" in x && x.payload ? [x.payload] : []));
    const results = new Map((await insertJobs(db, valid, payloads)).map((r, i) => [valid[i].id, r]));
    return c.json(
      {
        jobs: prepared.map((x) => {
          if ("error" in x) return x.error.body();
          const r = results.get(x.job.id)!;
          if (r.kind === "conflict")
            return conflict("idempotency_conflict", `idempotency_key ${x.job.idempotency_key} was used with a different request (job ${r.job.id})`).body();
          return jobView(r.job);
        }),
      },
      200,
    );
  });

  app.get("/jobs/:id", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:read");
    const id = c.req.param("id");
    if (!UUID.test(id)) throw notFound(`job ${id}`);
    const job = await getJob(db, id, tenantFilter(p));
    if (!job) throw notFound(`job ${id}`);
    // The one view that loads a stored body: listings and write answers show body_ref and body_size.
    const body = job.target.body_ref ? await loadPayload(db, job.target.body_ref) : undefined;
    return c.json(jobView(job, await listAttempts(db, id), body));
  });

  app.get("/jobs", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:read");
    const q = c.req.query();
    const status = q.status || null;
    if (status && !JOB_STATUSES.includes(status as never)) throw badRequest(`status must be one of ${JOB_STATUSES.join(", ")}`, "status");
    const instant = (f: string) => (q[f] ? parseOrThrow(instantField, q[f], f) : null);
    let afterId: string | null = null;
    if (q.cursor) {
      afterId = Buffer.from(q.cursor, "base64url").toString();
      if (!UUID.test(afterId)) throw badRequest("cursor is not one this API gave out", "cursor");
    }
    const limit = int("limit", q.limit, 1, 1000, 100);
    if (q.order && q.order !== "asc" && q.order !== "desc") throw badRequest("order must be asc or desc", "order");
    let tenant = tenantFilter(p);
    if (tenant === null && q.tenant) tenant = q.tenant;
    const rows = await listJobs(db, {
      tenant,
      status,
      scheduleId: q.schedule_id || null,
      dueBefore: instant("due_before"),
      dueAfter: instant("due_after"),
      afterId,
      limit: limit + 1,
      newestFirst: q.order === "desc",
    });
    const page = rows.slice(0, limit);
    return c.json({
      items: page.map((j) => jobView(j)),
      next_cursor: rows.length > limit ? Buffer.from(page[page.length - 1].id).toString("base64url") : null,
    });
  });

  app.post("/jobs/:id/cancel", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:write");
    const id = c.req.param("id");
    const body = parseOrThrow(JobCancelSchema, await readJson(c));
    if (!UUID.test(id)) throw notFound(`job ${id}`);
    c.set("audited", true);
    const job = await cancelJob(db, id, tenantFilter(p), body.if_version ?? null, { actor: p.actor, reason: body.reason ?? null });
    if (job) return c.json(jobView(job), job.status === "running" ? 202 : 200);
    const current = await getJob(db, id, tenantFilter(p));
    if (!current) throw notFound(`job ${id}`);
    if (TERMINAL.has(current.status)) throw conflict("job_finished", `job ${id} is already ${current.status}`);
    throw conflict("version_mismatch", `job ${id} is at version ${current.version}, not ${body.if_version}`);
  });

  app.patch("/jobs/:id", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:write");
    const id = c.req.param("id");
    const body = parseOrThrow(JobRescheduleSchema, await readJson(c));
    if (body.run_at && body.delay !== undefined) throw badRequest("give run_at or delay, not both", "delay");
    if (!body.run_at && body.delay === undefined) throw badRequest("give run_at or delay", "run_at");
    if (!UUID.test(id)) throw notFound(`job ${id}`);
    // A delay counts from the database's now(), in the UPDATE.
    const due = body.run_at ?? { delayMs: body.delay! };
    c.set("audited", true);
    const job = await rescheduleJob(db, id, tenantFilter(p), due, body.if_version ?? null, { actor: p.actor, reason: body.reason ?? null });
    if (job) return c.json(jobView(job));
    const current = await getJob(db, id, tenantFilter(p));
    if (!current) throw notFound(`job ${id}`);
    if (current.status !== "scheduled" && current.status !== "queued")
      throw conflict("not_reschedulable", `job ${id} is ${current.status}; only scheduled or queued jobs can be rescheduled`);
    throw conflict("version_mismatch", `job ${id} is at version ${current.version}, not ${body.if_version}`);
  });

  return app;
}
