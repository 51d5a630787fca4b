import type { Completion } from "../../src/store/worker-queries.ts";

/** The completion a successful call writes (the worker's own for a 2xx answer), for benches that drive CompleteAttempts directly. */
export function success(job: { job_id: string; gen: number; attempt_id: string }, httpStatus: number, startedAt: Date, finishedAt: Date): Completion {
  return {
    ...job,
    outcome: "success",
    http_status: httpStatus,
    error: null,
    possibly_delivered: false,
    started_at: startedAt,
    finished_at: finishedAt,
    next_status: "succeeded",
    next_delay_ms: null,
    last_error: null,
    counts_try: true,
    throttle_until: null,
    dead_reason: null,
  };
}
