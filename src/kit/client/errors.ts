/** An HTTP error from the scheduler, in its one error shape: `code`, `message`, `path`. */
export class SchedulerApiError extends Error {
  constructor(
    /** The HTTP status (400, 401, 403, 404, 409, 413, 429, 5xx). */
    readonly status: number,
    /** Stable and machine-readable: invalid_request, not_found, idempotency_conflict, … */
    readonly code: string,
    message: string,
    /** The field at fault, like "target.url" or "jobs.3.delay", when there is one. */
    readonly path?: string,
    /** Response headers (fly-replay, retry-after, …). */
    readonly headers?: Headers,
  ) {
    super(message);
    this.name = "SchedulerApiError";
  }
}

/** The request never got an answer (refused, reset, DNS, …), after the retries it was allowed. */
export class SchedulerNetworkError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SchedulerNetworkError";
  }
}

/** The error body (any shape) and response → SchedulerApiError. */
export function apiErrorFrom(body: unknown, res: Response): SchedulerApiError {
  const e = body && typeof body === "object" ? (body as { error?: { code?: unknown; message?: unknown; path?: unknown } }).error : undefined;
  if (e && typeof e.code === "string") {
    return new SchedulerApiError(
      res.status,
      e.code,
      typeof e.message === "string" ? e.message : e.code,
      typeof e.path === "string" ? e.path : undefined,
      res.headers,
    );
  }
  return new SchedulerApiError(
    res.status,
    `http_${res.status}`,
    typeof body === "string" && body ? body.slice(0, 500) : `HTTP ${res.status}`,
    undefined,
    res.headers,
  );
}
