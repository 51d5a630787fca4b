import type { ClaimedJob, JobStatus } from "../store/types.ts";
import { backoffDelay } from "./backoff.ts";
import type { DeliveryResult } from "./deliver.ts";

/** Throttled calls do not use up max_attempts, but they stop after this long without expires_at. */
export const THROTTLE_LIMIT_MS = 24 * 3600 * 1000;

export interface NextState {
  status: JobStatus;
  /** Retry after this long (counted from the database's clock), or null: no retry. */
  delayMs: number | null;
  countsTry: boolean;
  throttleUntil: Date | null;
  deadReason: string | null;
  error: string | null;
}

/** What a call's classified answer means for the job (README "What a webhook target receives": how the answer is classified). */
export function decideNext(job: ClaimedJob, r: DeliveryResult, nowMs: number, random: () => number = Math.random): NextState {
  const base = { countsTry: false, throttleUntil: null, deadReason: null, error: r.error, delayMs: null };
  if (r.outcome === "success") return { ...base, status: "succeeded", countsTry: true };
  if (r.outcome === "permanent") {
    return { ...base, status: "dead", countsTry: true, deadReason: r.deadReason ?? (r.refused ? "target_refused" : "permanent") };
  }
  const expiresAt = job.expires_at?.getTime() ?? null;
  const tries = job.tries + 1;
  if (r.outcome === "throttled") {
    const limit = expiresAt ?? job.throttle_until?.getTime() ?? nowMs + THROTTLE_LIMIT_MS;
    const wait = Math.max(
      r.retryAfterMs ?? 0,
      backoffDelay({ attempt: Math.max(1, job.calls), baseMs: job.backoff_base_ms, maxMs: job.backoff_max_ms, random }),
    );
    const next = nowMs + wait;
    const throttleUntil = job.throttle_until ? null : new Date(nowMs + THROTTLE_LIMIT_MS);
    if (next > limit) {
      return expiresAt !== null
        ? { ...base, status: "expired", error: `${r.error}; next try would fall after expires_at` }
        : { ...base, status: "dead", deadReason: "throttled_too_long", error: `${r.error}; throttled for 24 h` };
    }
    return { ...base, status: "scheduled", delayMs: wait, throttleUntil };
  }
  // transient or unknown: a try used up.
  if (tries >= job.max_attempts) return { ...base, status: "dead", countsTry: true, deadReason: "max_attempts" };
  const wait = backoffDelay({ attempt: tries, baseMs: job.backoff_base_ms, maxMs: job.backoff_max_ms, random });
  if (expiresAt !== null && nowMs + wait >= expiresAt) {
    return { ...base, status: "expired", countsTry: true, error: `${r.error}; next try would fall after expires_at` };
  }
  return { ...base, status: "scheduled", countsTry: true, delayMs: wait };
}
