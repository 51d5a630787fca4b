import type { JobRow } from "../store/types.ts";
import { classifyFetchError, classifyStatus, type Outcome } from "./classify.ts";
import { parseRetryAfter } from "./retry-after.ts";
import { signWebhook } from "./signature.ts";
import { assertTargetAllowed, TargetRefusedError } from "./target-guard.ts";

export interface DeliveryContext {
  attemptId: string;
  attemptNumber: number;
  signingKey?: Uint8Array;
  allowPrivateTargets: boolean;
  /** Aborts the call: cooperative cancel, or a graceful stop that ran out of time. */
  signal?: AbortSignal;
}

export interface DeliveryResult {
  outcome: Outcome;
  httpStatus: number | null;
  error: string | null;
  possiblyDelivered: boolean;
  retryAfterMs: number | null;
  /** Refused before any call (private target): a permanent failure with nothing sent. */
  refused: boolean;
  startedAt: Date;
  finishedAt: Date;
}

/** The headers every call carries (API.md "What a webhook target receives"). */
export function webhookHeaders(job: JobRow, ctx: DeliveryContext, body: string, nowMs: number): Record<string, string> {
  const ts = Math.floor(nowMs / 1000);
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(job.target.headers)) h[k.toLowerCase()] = v;
  if (job.target.json && body !== "" && !h["content-type"]) h["content-type"] = "application/json";
  h["webhook-id"] = job.id;
  h["webhook-timestamp"] = String(ts);
  if (ctx.signingKey) h["webhook-signature"] = signWebhook(ctx.signingKey, job.id, ts, body);
  h["idempotency-key"] =
    job.idempotency_key ?? (job.schedule_id && job.nominal_time ? `${job.schedule_id}@${job.nominal_time.toISOString()}` : job.id);
  h["scheduler-attempt"] = String(ctx.attemptNumber);
  h["scheduler-attempt-id"] = ctx.attemptId;
  h["scheduler-fencing-token"] = job.epoch ?? "0";
  h["scheduler-scheduled-for"] = job.scheduled_for.toISOString();
  if (job.nominal_time) h["scheduler-nominal-time"] = job.nominal_time.toISOString();
  h["user-agent"] = "scheduler-webhooks/0.1";
  return h;
}

/**
 * One call to the target, outside any transaction. Never throws: every way a call can end
 * becomes a classified result.
 */
export async function deliver(job: JobRow, ctx: DeliveryContext): Promise<DeliveryResult> {
  const startedAt = new Date();
  const done = (r: Omit<DeliveryResult, "startedAt" | "finishedAt">): DeliveryResult => ({ ...r, startedAt, finishedAt: new Date() });
  try {
    await assertTargetAllowed(job.target.url, { allowPrivate: ctx.allowPrivateTargets });
  } catch (err) {
    if (err instanceof TargetRefusedError) {
      return done({ outcome: "permanent", httpStatus: null, error: err.message, possiblyDelivered: false, retryAfterMs: null, refused: true });
    }
    return done({ outcome: "transient", httpStatus: null, error: (err as Error).message, possiblyDelivered: false, retryAfterMs: null, refused: false });
  }
  const body = job.target.body ?? "";
  const method = job.target.method;
  const timeout = AbortSignal.timeout(Number(job.timeout_ms));
  const signal = ctx.signal ? AbortSignal.any([timeout, ctx.signal]) : timeout;
  try {
    const res = await fetch(job.target.url, {
      method,
      headers: webhookHeaders(job, ctx, body, startedAt.getTime()),
      body: method === "GET" || method === "HEAD" ? undefined : body,
      redirect: "manual",
      signal,
    });
    // Read (and bound) the answer so the connection is reused; its content is not kept.
    await res.arrayBuffer().catch(() => undefined);
    const outcome = classifyStatus(res.status);
    return done({
      outcome,
      httpStatus: res.status,
      error: outcome === "success" ? null : `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}`,
      possiblyDelivered: outcome !== "success",
      retryAfterMs: outcome === "throttled" ? parseRetryAfter(res.headers.get("retry-after"), Date.now()) : null,
      refused: false,
    });
  } catch (err) {
    const c = classifyFetchError(err);
    const aborted = ctx.signal?.aborted && !timeout.aborted;
    return done({
      outcome: c.outcome,
      httpStatus: null,
      error: aborted ? `call aborted: ${String(ctx.signal?.reason ?? "stopped")}` : c.message,
      possiblyDelivered: c.possiblyDelivered,
      retryAfterMs: null,
      refused: false,
    });
  }
}
