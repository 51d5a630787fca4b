import type { Completion } from "../../src/store/worker-queries.ts";

/**
 * The outcome a successful call writes (the worker's own for a 2xx answer), as CompleteAttempts
 * takes it; `p` names the job and attempt and may change any field (a failure's outcome, its times).
 */
export function successOf(p: Partial<Completion> & Pick<Completion, "job_id" | "gen" | "attempt_id">): Completion {
  const now = new Date();
  return {
    outcome: "success",
    http_status: 200,
    error: null,
    possibly_delivered: false,
    started_at: now,
    finished_at: now,
    next_status: "succeeded",
    next_delay_ms: null,
    last_error: null,
    counts_try: true,
    throttle_until: null,
    dead_reason: null,
    ...p,
  };
}
