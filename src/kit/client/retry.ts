import { SchedulerApiError, SchedulerNetworkError } from "./errors.ts";

export interface RetryPolicy {
  /** Tries in all, the first included (default 5). */
  attempts?: number;
  baseMs?: number;
  maxMs?: number;
}

/** An answer (an HTTP error) or the caller's abort: not a network error, not retried. */
function isAbort(err: unknown): boolean {
  return err instanceof SchedulerApiError || (err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError"));
}

/**
 * Runs `send` again when it failed without an answer (fetch rejected: refused, reset, DNS).
 * Only for requests whose repeat is safe: a create with an idempotency key.
 */
export async function retryOnNetworkError<T>(send: () => Promise<T>, p: RetryPolicy = {}): Promise<T> {
  const attempts = Math.max(1, p.attempts ?? 5);
  for (let i = 1; ; i++) {
    try {
      return await send();
    } catch (err) {
      if (isAbort(err)) throw err;
      if (i >= attempts) throw new SchedulerNetworkError(`no answer after ${attempts} tries: ${(err as Error).message}`, { cause: err });
      // Capped exponential backoff with full jitter.
      const cap = Math.min(p.maxMs ?? 5000, (p.baseMs ?? 200) * 2 ** (i - 1));
      await new Promise((r) => setTimeout(r, Math.random() * cap));
    }
  }
}

/** A request that is not repeated: a network failure becomes SchedulerNetworkError. */
export async function once<T>(send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (err) {
    if (isAbort(err)) throw err;
    throw new SchedulerNetworkError(`no answer: ${(err as Error).message}`, { cause: err });
  }
}
