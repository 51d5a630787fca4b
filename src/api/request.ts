import type { Context } from "hono";
import * as v from "valibot";
import { badRequest } from "./errors.ts";
import { assertStorable, jsonTooDeep, MAX_JSON_DEPTH, mayHoldBadText } from "./input-guard.ts";

/**
 * The JSON body; an empty body is an empty object (for POSTs like /cancel). Refused before
 * any schema: nesting deeper than MAX_JSON_DEPTH, and strings the database cannot store.
 */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") return {};
  if (jsonTooDeep(text)) throw badRequest(`the request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`, "body");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw badRequest("the request body is not valid JSON", "body");
  }
  if (mayHoldBadText(text)) assertStorable(value);
  return value;
}

export function queryInt(field: string, raw: string | undefined, min: number, max: number, dflt: number): number {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw) || n < min || n > max) throw badRequest(`${field} must be a whole number from ${min} to ${max}`, field);
  return n;
}

// Versions are int columns: a number past 2^31 - 1 would fail in SQL (a 500), not compare unequal.
export const IF_VERSION = v.optional(
  v.pipe(
    v.number("must be a number"),
    v.integer("must be a whole number"),
    v.minValue(0, "must be at least 0"),
    v.maxValue(2_147_483_647, "must be at most 2147483647"),
  ),
);
// Why the change was made: kept in the audit log.
export const REASON = v.optional(v.pipe(v.string("must be a string"), v.maxLength(1000, "must be at most 1000 characters")));
