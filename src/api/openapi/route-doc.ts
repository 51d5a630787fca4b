import type * as v from "valibot";
import type { Scope } from "../tokens.ts";
import type { ComponentName } from "./components.ts";

/**
 * One route's documentation. Documenting a route is adding one of these to the list of its
 * area (jobs-docs.ts, schedules-docs.ts, …): the request schemas are the valibot schemas the
 * route validates with, imported, never copied.
 */
export interface RouteDoc {
  method: "get" | "post" | "put" | "patch" | "delete";
  /** As Hono writes it: /v1/jobs/:id. */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  /** The scope the route needs, or "none" for a route served without a token. */
  auth: Scope | "none";
  /** Descriptions of the path parameters (each :name is a required string parameter). */
  params?: Record<string, string>;
  /** Query parameters: an object schema, one parameter per entry (v.optional: not required). */
  query?: v.ObjectSchema<v.ObjectEntries, undefined> | v.StrictObjectSchema<v.ObjectEntries, undefined>;
  /** The JSON request body. */
  body?: v.GenericSchema;
  /** Whether the body may be left out (POSTs like /cancel take an empty body). */
  bodyOptional?: boolean;
  responses: Record<number, Response>;
}

export interface Response {
  description: string;
  /** A component name, an inline schema, or nothing (no body documented). */
  schema?: ComponentName | v.GenericSchema;
  /** application/json unless said. */
  contentType?: string;
  /** Response headers: name → description. */
  headers?: Record<string, string>;
}

export const json = (schema: ComponentName | v.GenericSchema, description: string): Response => ({ schema, description });

const ERRORS: Record<number, string> = {
  400: "Invalid input: the error names the field in `path`.",
  401: "No bearer token, or an unknown one.",
  403: "The token lacks the scope, or the object belongs to another tenant.",
  404: "Unknown id (or another tenant's).",
  409: "Conflict; also any write outside the home region (with `fly-replay: region=<home>`).",
  413: "The request body is larger than SCHEDULER_MAX_BODY_BYTES (10 MiB by default).",
  503: "Not available yet.",
};

const ERROR_HEADERS: Record<number, Record<string, string>> = {
  401: { "www-authenticate": "Bearer" },
  409: { "fly-replay": "region=<home region>, on a write outside the home region: Fly's proxy replays the request there." },
};

/** The standard error answers, in the one error shape. */
export function errors(...codes: number[]): Record<number, Response> {
  return Object.fromEntries(codes.map((c) => [c, { ...json("Error", ERRORS[c] ?? "Error."), ...(ERROR_HEADERS[c] ? { headers: ERROR_HEADERS[c] } : {}) }]));
}

/** Errors every token-protected route can answer. */
export const AUTH_ERRORS = [401, 403] as const;
/** Errors of every write under /v1 (body limit, auth, home-region check). */
export const WRITE_ERRORS = [400, 401, 403, 409, 413] as const;
