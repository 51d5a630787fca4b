import { Hono, type Context } from "hono";
import * as v from "valibot";
import type { Config } from "../config.ts";
import type { Db } from "../store/db.ts";
import { heartbeatAsync } from "../store/async-queries.ts";
import { getJob } from "../store/jobs.ts";
import { TERMINAL, type JobRow } from "../store/types.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { endAsyncAttempt, type AsyncReport } from "../worker/async-finish.ts";
import { tokenGeneration, verifyLeaseToken } from "../worker/lease-token.ts";
import { ApiError, badRequest } from "./errors.ts";
import { durationField, parseOrThrow } from "./job-input.ts";
import { jobView } from "./job-view.ts";
import { readJson } from "./request.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * A checkpoint goes back to the target in a header (Scheduler-Checkpoint, base64url): 4 KiB
 * of JSON is ~5.5 KB there, inside the 8 KB a header line may have behind common proxies.
 * It is a progress marker; bulk state belongs in the target's own storage.
 */
export const MAX_CHECKPOINT_BYTES = 4096;

/** The lease routes, reached without a bearer token: the lease token is the credential. */
export const LEASE_ROUTE = /^\/v1\/jobs\/[^/]+\/(heartbeat|complete)$/;

const LEASE_TOKEN = v.pipe(v.string("must be the Scheduler-Lease-Token the call carried"), v.maxLength(200, "is not a lease token"));

export const HeartbeatSchema = v.strictObject({ lease_token: LEASE_TOKEN, checkpoint: v.optional(v.unknown()) });
export const CompleteSchema = v.strictObject({
  lease_token: LEASE_TOKEN,
  outcome: v.picklist(["succeeded", "failed"], "must be succeeded or failed"),
  error: v.optional(v.pipe(v.string("must be a string"), v.maxLength(2000, "must be at most 2000 characters"))),
  retry_after: v.optional(durationField(7 * 86_400_000)),
});

export interface AsyncRoutesDeps {
  db: Db;
  config: Pick<Config, "asyncLeaseMs">;
  metrics: Metrics;
  log: Logger;
}

const refused = () =>
  new ApiError(401, "invalid_lease_token", "lease_token is not a lease token of this job (use the Scheduler-Lease-Token header of the call)");
const stale = (job: JobRow, gen: number) =>
  new ApiError(
    409,
    "stale_lease",
    TERMINAL.has(job.status)
      ? `this attempt has ended: the job is ${job.status}`
      : gen < job.lease_generation
        ? "this lease token is from an earlier attempt: the job has been run again since (its lease lapsed or it was retried)"
        : `this attempt has ended: the job is ${job.status}, waiting for another attempt`,
  );
const timedOut = (job: JobRow) =>
  new ApiError(409, "timed_out", `the attempt ran past the job's timeout (its execution ceiling) and has ended; the job is ${job.status}`);

/**
 * POST /v1/jobs/:id/heartbeat and /complete, called by the target of an async job. The lease
 * token from the call is the only credential: it names this job and this attempt's lease
 * generation, so a token from an older attempt is stale (409, nothing changes) and anything
 * else is refused (401). A bearer token is neither needed nor enough. They are writes, so
 * outside the home region they answer 409 with fly-replay like every other write.
 */
export function asyncRoutes(deps: AsyncRoutesDeps) {
  const { db, config, metrics, log } = deps;
  const app = new Hono();

  /** The job and the token's generation, when the token is one of this job's. */
  const authorize = async (c: Context, token: string): Promise<{ job: JobRow; gen: number }> => {
    const id = c.req.param("id") ?? "";
    const gen = tokenGeneration(token);
    const job = UUID.test(id) && gen !== undefined ? await getJob(db, id, null) : undefined;
    if (!job || gen === undefined || !job.async || !verifyLeaseToken(token, job.lease_key, job.id)) throw refused();
    return { job, gen };
  };

  /** Why a conditional write changed nothing: the ceiling (it is ended now) or a stale token. */
  const explain = async (job: JobRow, gen: number): Promise<ApiError> => {
    const now = await getJob(db, job.id, null);
    if (!now) return refused();
    if (now.status === "running" && now.lease_generation === gen) {
      const ended = await endAsyncAttempt(db, now, gen, { kind: "timed_out" }, metrics);
      if (ended) {
        metrics.asyncTimeouts.inc();
        log.warn({ job_id: job.id, status: ended.status }, "async job ran past its timeout; attempt ended");
        return timedOut(ended);
      }
      return stale((await getJob(db, job.id, null)) ?? now, gen);
    }
    return stale(now, gen);
  };

  app.post("/jobs/:id/heartbeat", async (c) => {
    const raw = await readJson(c);
    const body = parseOrThrow(HeartbeatSchema, raw);
    let checkpoint: string | null | undefined;
    if (raw && typeof raw === "object" && "checkpoint" in raw) {
      checkpoint = body.checkpoint === null ? null : JSON.stringify(body.checkpoint);
      if (checkpoint !== null && Buffer.byteLength(checkpoint) > MAX_CHECKPOINT_BYTES) {
        throw badRequest(
          `checkpoint must be at most ${MAX_CHECKPOINT_BYTES} bytes of JSON; keep larger state in your own storage and checkpoint a reference to it`,
          "checkpoint",
        );
      }
    }
    let job: JobRow, gen: number;
    try {
      ({ job, gen } = await authorize(c, body.lease_token));
    } catch (err) {
      metrics.asyncHeartbeats.inc({ result: "refused" });
      throw err;
    }
    const hb =
      job.status === "running" && job.lease_generation === gen
        ? await heartbeatAsync(db, { jobId: job.id, gen, leaseMs: config.asyncLeaseMs, checkpoint })
        : undefined;
    if (!hb) {
      const err = await explain(job, gen);
      metrics.asyncHeartbeats.inc({ result: err.code === "timed_out" ? "timed_out" : "stale" });
      throw err;
    }
    metrics.asyncHeartbeats.inc({ result: "ok" });
    log.debug({ job_id: job.id, lease_until: hb.lease_until, checkpoint: checkpoint !== undefined }, "async heartbeat");
    return c.json({
      lease_until: hb.lease_until.toISOString(),
      cancel_requested: hb.cancel_requested,
      deadline_at: hb.deadline_at ? hb.deadline_at.toISOString() : null,
    });
  });

  app.post("/jobs/:id/complete", async (c) => {
    const body = parseOrThrow(CompleteSchema, await readJson(c));
    if (body.outcome === "succeeded" && (body.retry_after !== undefined || body.error !== undefined)) {
      throw badRequest("retry_after and error go with outcome failed", body.retry_after !== undefined ? "retry_after" : "error");
    }
    const { job, gen } = await authorize(c, body.lease_token);
    if (job.status !== "running" || job.lease_generation !== gen) throw stale(job, gen);
    const report: AsyncReport =
      body.outcome === "succeeded" ? { kind: "succeeded" } : { kind: "failed", error: body.error ?? null, retryAfterMs: body.retry_after ?? null };
    const row = await endAsyncAttempt(db, job, gen, report, metrics);
    if (!row) throw await explain(job, gen);
    log.info({ job_id: job.id, reported: body.outcome, status: row.status, error: body.error }, "async job completed by its target");
    return c.json(jobView(row));
  });

  return app;
}
