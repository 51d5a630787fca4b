import type { ClaimedJob } from "../store/types.ts";
import { classifyFetchError, classifyStatus, type Outcome } from "./classify.ts";
import { parseRetryAfter } from "./retry-after.ts";
import { signatureHeader } from "./signature.ts";
import { pinTarget, unpinMessage, type PinnedCall } from "./pinned-target.ts";
import { TargetRefusedError } from "./target-guard.ts";
import { Deadlines } from "../time/deadlines.ts";
import type { JobAbort } from "./job-abort.ts";

export interface DeliveryContext {
  attemptId: string;
  attemptNumber: number;
  /** A late run by misfire policy: Scheduler-Catchup: true. */
  catchup?: boolean;
  /** The keys this call is signed with (the job's schedule's, its tenant's, or the fallback); none: unsigned. */
  signingKeys?: readonly Uint8Array[];
  allowPrivateTargets: boolean;
  /** The job's abort, which aborts the call: cooperative cancel, a lost lease, or a graceful stop that ran out of time. */
  abort?: JobAbort;
  /** Async jobs: the attempt's lease token (Scheduler-Lease-Token) and the call's own time limit. */
  leaseToken?: string;
  callTimeoutMs?: number;
}

export interface DeliveryResult {
  outcome: Outcome;
  httpStatus: number | null;
  error: string | null;
  possiblyDelivered: boolean;
  retryAfterMs: number | null;
  /** Refused before any call (private target): a permanent failure with nothing sent. */
  refused: boolean;
  /** A refusal's forbidden address: for the log, never the attempt's error (a DNS oracle). */
  refusedAddress?: string;
  /** Why the job dies, when a permanent failure has a reason of its own (payload_missing). */
  deadReason?: string;
  startedAt: Date;
  finishedAt: Date;
}

/** The headers every call carries (README "What a webhook target receives"). */
export function webhookHeaders(job: ClaimedJob, ctx: DeliveryContext, body: string, nowMs: number): Record<string, string> {
  const ts = Math.floor(nowMs / 1000);
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(job.target.headers)) h[k.toLowerCase()] = v;
  if (job.target.json && body !== "" && !h["content-type"]) h["content-type"] = "application/json";
  h["webhook-id"] = job.id;
  h["webhook-timestamp"] = String(ts);
  const sig = ctx.signingKeys && signatureHeader(ctx.signingKeys, job.id, ts, body);
  if (sig) h["webhook-signature"] = sig;
  h["idempotency-key"] = job.idempotency_key ?? (job.schedule_id && job.nominal_time ? `${job.schedule_id}@${job.nominal_time.toISOString()}` : job.id);
  h["scheduler-attempt"] = String(ctx.attemptNumber);
  h["scheduler-attempt-id"] = ctx.attemptId;
  h["scheduler-fencing-token"] = String(job.epoch ?? 0);
  h["scheduler-scheduled-for"] = job.scheduled_for.toISOString();
  if (job.nominal_time) h["scheduler-nominal-time"] = job.nominal_time.toISOString();
  if (ctx.catchup) h["scheduler-catchup"] = "true";
  if (ctx.leaseToken) {
    h["scheduler-lease-token"] = ctx.leaseToken;
    // The last checkpoint an earlier attempt stored: resume from there.
    if (job.checkpoint !== null) h["scheduler-checkpoint"] = Buffer.from(job.checkpoint).toString("base64url");
  }
  h["user-agent"] = "scheduler-webhooks/0.1";
  return h;
}

/**
 * One call to the target, outside any transaction. Never throws: every way a call can end
 * becomes a classified result.
 */
export async function deliver(job: ClaimedJob, ctx: DeliveryContext): Promise<DeliveryResult> {
  const startedAt = new Date();
  let call: PinnedCall;
  try {
    // Known pins come back as they are, without a promise (most calls).
    const pinned = pinTarget(job.target.url, ctx.allowPrivateTargets);
    call = pinned instanceof Promise ? await pinned : pinned;
  } catch (err) {
    if (err instanceof TargetRefusedError) {
      return finished(startedAt, {
        outcome: "permanent",
        httpStatus: null,
        error: err.message,
        possiblyDelivered: false,
        retryAfterMs: null,
        refused: true,
        refusedAddress: err.address,
      });
    }
    return finished(startedAt, {
      outcome: "transient",
      httpStatus: null,
      error: (err as Error).message,
      possiblyDelivered: false,
      retryAfterMs: null,
      refused: false,
    });
  }
  const body = job.target.body ?? "";
  const method = job.target.method;
  const limit = new CallLimit(ctx.callTimeoutMs ?? job.timeout_ms, ctx.abort);
  try {
    const headers = webhookHeaders(job, ctx, body, startedAt.getTime());
    if (call.host) headers.host = call.host;
    const res = await fetch(call.url, {
      method,
      headers,
      body: method === "GET" || method === "HEAD" ? undefined : body,
      redirect: "manual",
      signal: limit.signal,
      // The connection goes to the checked address; the certificate must be the name's.
      ...(call.tls ? { tls: call.tls } : {}),
    });
    // A short answer of known length is read whole, here (most webhook answers are a few bytes
    // with a Content-Length); any other through a bounded reader.
    const length = Number(res.headers.get("content-length") ?? NaN);
    if (length >= 0 && length <= MAX_ANSWER_BYTES) {
      try {
        await res.arrayBuffer();
      } catch {
        // The status already decided the outcome; a broken body does not change it.
      }
    } else await drainStream(res);
    const outcome = classifyStatus(res.status);
    return finished(startedAt, {
      outcome,
      httpStatus: res.status,
      error: outcome === "success" ? null : `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}`,
      // An answer came back: the target saw the request, nothing is in doubt.
      possiblyDelivered: false,
      retryAfterMs: outcome === "throttled" ? parseRetryAfter(res.headers.get("retry-after"), Date.now()) : null,
      refused: false,
    });
  } catch (err) {
    const c = classifyFetchError(err);
    const outer = ctx.abort?.signal;
    const aborted = outer?.aborted && !limit.timedOut;
    return finished(startedAt, {
      outcome: c.outcome,
      httpStatus: null,
      error: aborted ? `call aborted: ${String(outer?.reason ?? "stopped")}` : unpinMessage(c.message, job.target.url, call),
      possiblyDelivered: c.possiblyDelivered,
      retryAfterMs: null,
      refused: false,
    });
  } finally {
    limit.end();
  }
}

/** The call's result, finished now: its instants set on the object given, not on a copy of it. */
function finished(startedAt: Date, r: Omit<DeliveryResult, "startedAt" | "finishedAt">): DeliveryResult {
  const out = r as DeliveryResult;
  out.startedAt = startedAt;
  out.finishedAt = new Date();
  return out;
}

/** The time limits of every call of this process, on one timer: a call's limit times it out. */
const limits = new Deadlines<AbortController, CallLimit>(
  (expired) => {
    for (const limit of expired) limit.timeOut();
  },
  () => performance.now(),
  true,
);

/**
 * One signal for a call: aborted by its time limit or by the job (a cancel, a stop). Ended
 * when the call is: its limit dropped, the job no longer pointing at it. AbortSignal.timeout
 * keeps its timer (and the signal) alive for the whole limit after the call, and
 * AbortSignal.any left ~2 kB of garbage a call: in a herd, tens of MB at the peak of RSS.
 * A class, not closures: one object a call where closures made four and their scope.
 */
class CallLimit {
  private readonly ac = new AbortController();
  readonly signal = this.ac.signal;
  timedOut = false;

  constructor(
    ms: number,
    private readonly outer: JobAbort | undefined,
  ) {
    limits.hold(this.ac, performance.now() + ms, this);
    if (outer?.signal.aborted) this.ac.abort(outer.signal.reason);
    else if (outer) outer.call = this.ac;
  }

  timeOut(): void {
    this.timedOut = true;
    this.ac.abort(new DOMException("The operation timed out.", "TimeoutError"));
  }

  end(): void {
    limits.remove(this.ac);
    if (this.outer?.call === this.ac) this.outer.call = null;
  }
}

const MAX_ANSWER_BYTES = 64 * 1024;

/** Reads a bounded amount of an answer of unknown or large length (so the connection can be reused), keeps none of it. */
async function drainStream(res: Response): Promise<void> {
  const reader = res.body?.getReader();
  if (!reader) return;
  let seen = 0;
  try {
    while (seen <= MAX_ANSWER_BYTES) {
      const { done, value } = await reader.read();
      if (done) return;
      seen += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The status already decided the outcome; a broken body does not change it.
  }
}
