import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** Every HTTP error leaves in this one shape: { error: { code, message, path? } }. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly path?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }

  body() {
    return { error: { code: this.code, message: this.message, ...(this.path !== undefined ? { path: this.path } : {}) } };
  }
}

export const badRequest = (message: string, path?: string) => new ApiError(400, "invalid_request", message, path);
export const notFound = (what: string) => new ApiError(404, "not_found", `${what} not found`);
export const conflict = (code: string, message: string) => new ApiError(409, code, message);

export function errorResponse(c: Context, err: ApiError): Response {
  for (const [k, v] of Object.entries(err.headers ?? {})) c.header(k, v);
  return c.json(err.body(), err.status);
}
