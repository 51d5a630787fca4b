import type { WebhookCall } from "./call.ts";

export interface AsyncJobContext<C> {
  /** Aborted when the scheduler asks to cancel the job, or this attempt's lease is gone (409). */
  signal: AbortSignal;
  /** The last checkpoint an earlier attempt saved (null on a fresh start): resume from here. */
  checkpoint: C | null;
  /** Saves progress now (sent with a heartbeat); a later attempt receives it. At most 4 KiB of JSON. */
  saveCheckpoint(checkpoint: C): Promise<void>;
}

export interface AsyncJobOptions {
  /** The scheduler's base URL, like "https://scheduler.example.com". */
  schedulerUrl: string;
  /** The async call (it carries the Scheduler-Lease-Token). */
  call: WebhookCall;
  /** Heartbeat period, ms (default 10 s; keep it well below the scheduler's async lease). */
  heartbeatMs?: number;
  fetch?: typeof fetch;
  /** Heartbeat or completion errors (network); the timer keeps trying. */
  onError?: (err: unknown) => void;
}

export type AsyncJobEnd = "succeeded" | "failed" | "cancelled" | "lease_lost";

class LeaseGone extends Error {}

/**
 * Runs an async job's work for the scheduler: heartbeats on a timer (with the latest
 * checkpoint), aborts `ctx.signal` when the scheduler answers `cancel_requested` or the lease
 * is gone, and completes the job: succeeded when `work` resolves, failed when it throws (a
 * cancelled job then ends cancelled). Answer the call with 202 first, then run this.
 */
export async function runAsyncJob<C = unknown>(o: AsyncJobOptions, work: (ctx: AsyncJobContext<C>) => Promise<void>): Promise<AsyncJobEnd> {
  const { call } = o;
  if (!call.leaseToken) throw new Error("runAsyncJob: the call has no Scheduler-Lease-Token (is the job async?)");
  const f = o.fetch ?? fetch;
  const base = o.schedulerUrl.replace(/\/+$/, "");
  const url = (what: string) => `${base}/v1/jobs/${encodeURIComponent(call.id)}/${what}`;
  const abort = new AbortController();
  let cancelled = false;
  let leaseLost = false;

  const post = async (what: string, body: unknown) =>
    f(url(what), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  const heartbeat = async (checkpoint?: C) => {
    const res = await post("heartbeat", checkpoint === undefined ? { lease_token: call.leaseToken } : { lease_token: call.leaseToken, checkpoint });
    if (res.status === 409 || res.status === 401) {
      leaseLost = true;
      abort.abort("lease_lost");
      throw new LeaseGone(`heartbeat answered ${res.status}: this attempt's lease is gone`);
    }
    if (!res.ok) throw new Error(`heartbeat answered ${res.status}`);
    const r = (await res.json()) as { cancel_requested?: boolean };
    if (r.cancel_requested && !cancelled) {
      cancelled = true;
      abort.abort("cancel_requested");
    }
  };

  const timer = setInterval(() => {
    heartbeat().catch((err) => {
      if (!(err instanceof LeaseGone)) o.onError?.(err);
    });
  }, o.heartbeatMs ?? 10_000);
  let error: unknown;
  try {
    await work({ signal: abort.signal, checkpoint: (call.checkpoint as C | null) ?? null, saveCheckpoint: (c) => heartbeat(c) });
  } catch (err) {
    error = err;
  } finally {
    clearInterval(timer);
  }
  if (leaseLost) return "lease_lost";
  const outcome = error === undefined && !cancelled ? "succeeded" : "failed";
  const message = cancelled ? "cancelled on request" : error instanceof Error ? error.message : error === undefined ? undefined : String(error);
  // Completion must reach the scheduler: retried a few times on network errors (a repeat of
  // one that did land answers 409 and changes nothing).
  for (let i = 0; ; i++) {
    try {
      const res = await post("complete", { lease_token: call.leaseToken, outcome, ...(message ? { error: message.slice(0, 2000) } : {}) });
      if (res.status === 409) return cancelled ? "cancelled" : "lease_lost";
      if (!res.ok) throw new Error(`complete answered ${res.status}`);
      return cancelled ? "cancelled" : outcome;
    } catch (err) {
      o.onError?.(err);
      if (i >= 4) throw err;
      await new Promise((r) => setTimeout(r, 200 * 2 ** i));
    }
  }
}
