import * as v from "valibot";
import type { DeadCursor, DeadFilter } from "../store/dlq.ts";
import { tenantFilter, type Principal } from "./auth.ts";
import { badRequest } from "./errors.ts";
import { instantField, parseOrThrow } from "./job-input.ts";

const text = (max: number) => v.pipe(v.string("must be a string"), v.minLength(1, "must not be empty"), v.maxLength(max, `must be at most ${max} characters`));

/**
 * Which dead jobs, as GET /v1/dlq takes it in its query and POST /v1/dlq/replay in "filter":
 * tenant (only for a token of every tenant), schedule_id, reason (a prefix of the failure
 * signature: "permanent", "max_attempts:5", "lease_lost"), dead_after (inclusive),
 * dead_before (exclusive), quarantined.
 */
export const DeadFilterSchema = v.strictObject({
  tenant: v.optional(text(200)),
  schedule_id: v.optional(text(200)),
  reason: v.optional(text(200)),
  dead_after: v.optional(instantField),
  dead_before: v.optional(instantField),
  quarantined: v.optional(v.boolean("must be true or false")),
});

export type DeadFilterInput = v.InferOutput<typeof DeadFilterSchema>;

/** The filter limited to what the token may see: a tenant token's own tenant, whatever it asks. */
export function toDeadFilter(f: DeadFilterInput, p: Principal): DeadFilter {
  const own = tenantFilter(p);
  return {
    tenant: own ?? f.tenant ?? null,
    scheduleId: f.schedule_id ?? null,
    reasonPrefix: f.reason ?? null,
    deadAfter: f.dead_after ?? null,
    deadBefore: f.dead_before ?? null,
    quarantined: f.quarantined ?? null,
  };
}

/** The same filter from a query string (GET /v1/dlq); field errors name the query parameter. */
export function deadFilterFromQuery(q: Record<string, string>): DeadFilterInput {
  const raw: Record<string, unknown> = {};
  for (const k of ["tenant", "schedule_id", "reason", "dead_after", "dead_before"] as const) if (q[k]) raw[k] = q[k];
  if (q.quarantined) {
    if (q.quarantined !== "true" && q.quarantined !== "false") throw badRequest("quarantined must be true or false", "quarantined");
    raw.quarantined = q.quarantined === "true";
  }
  return parseOrThrow(DeadFilterSchema, raw);
}

export function encodeDeadCursor(c: DeadCursor): string {
  return Buffer.from(JSON.stringify([c.deadKey, c.id])).toString("base64url");
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const KEY = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export function decodeDeadCursor(raw: string | undefined, path = "cursor"): DeadCursor | null {
  if (!raw) return null;
  try {
    const [deadKey, id] = JSON.parse(Buffer.from(raw, "base64url").toString()) as unknown[];
    if (typeof deadKey === "string" && KEY.test(deadKey) && typeof id === "string" && UUID.test(id)) return { deadKey, id };
  } catch {
    // falls through to the one error below
  }
  throw badRequest("cursor is not one this API gave out", path);
}
