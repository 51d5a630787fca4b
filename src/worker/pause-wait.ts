import type { ClaimedJob } from "../store/types.ts";
import type { DeliveryResult } from "./deliver.ts";
import { laneKey } from "./host-lane.ts";
import type { HostLimiter } from "./host-limiter.ts";

/** A call that finds its host paused (a Retry-After that came in after its slot was taken) waits this long at most. */
const MAX_PAUSE_WAIT_MS = 2000;

/** Whether the job's host is paused now: only then is there a pause to wait out (waitOutPause). */
export function hostPaused(limiter: HostLimiter<unknown>, job: ClaimedJob): boolean {
  return limiter.pausedUntil(laneKey(job.target.url, job.tenant, job.host_limits)) > Date.now();
}

/**
 * A Retry-After from another call to this host may have arrived after this job's slot was
 * taken (while its attempt was being opened): the pause holds for this call too. A short
 * pause is waited out; after a longer one the job is retried, as throttled (no try used up),
 * without a call. Returns a result only when nothing is sent.
 */
export async function waitOutPause(limiter: HostLimiter<unknown>, job: ClaimedJob, signal: AbortSignal): Promise<DeliveryResult | undefined> {
  const host = laneKey(job.target.url, job.tenant, job.host_limits);
  for (;;) {
    const ms = limiter.pausedUntil(host) - Date.now();
    if (ms <= 0) return undefined;
    const startedAt = new Date();
    const notSent = (outcome: "throttled" | "transient", error: string, retryAfterMs: number | null): DeliveryResult => ({
      outcome,
      httpStatus: null,
      possiblyDelivered: false,
      retryAfterMs,
      refused: false,
      error,
      startedAt,
      finishedAt: new Date(),
    });
    if (ms > MAX_PAUSE_WAIT_MS) return notSent("throttled", "not called: the host asked for a pause (Retry-After) just before this call; retried after it", ms);
    if (await sleepUnlessAborted(ms, signal)) {
      return notSent("transient", `call aborted before it was sent (waiting out the host's Retry-After): ${String(signal.reason ?? "stopped")}`, null);
    }
  }
}

/** Resolves true if `signal` aborts first, false once `ms` have passed. */
function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(false);
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
