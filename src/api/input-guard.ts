/**
 * Input that parses as JSON (or arrives in a URL) but that the database cannot store or the
 * process cannot afford, refused as a 400 naming the field before any schema or SQL sees it:
 * - NUL (U+0000): PostgreSQL text and jsonb cannot hold it (22021 / 22P05: a 500 otherwise);
 * - unpaired UTF-16 surrogates: not text at all (jsonb rejects the escape; the UTF-8 encoder
 *   of a driver would silently turn them into U+FFFD, changing what was sent);
 * - JSON nested deeper than MAX_JSON_DEPTH: JSON.parse recurses (200 k levels is a RangeError
 *   after seconds of CPU), and so do the schema, the hash and the database; the depth is
 *   counted on the text first, in one linear pass.
 */
import { badRequest } from "./errors.ts";

export const MAX_JSON_DEPTH = 64;

export function badText(s: string): string | null {
  if (s.indexOf("\u0000") >= 0) return "must not contain NUL (U+0000) characters";
  // A quick exit for the common case: no surrogate code units at all.
  if (!/[\uD800-\uDFFF]/.test(s)) return null;
  return !s.isWellFormed() ? "must not contain unpaired UTF-16 surrogates (not valid Unicode text)" : null;
}

/** True when the JSON text nests arrays/objects deeper than `max` (strings are skipped). */
export function jsonTooDeep(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

/**
 * Whether the parse of this JSON text can hold a string badText refuses: only through a
 * `\u` escape (JSON.parse refuses a raw NUL inside a string, and a body decoded from UTF-8
 * holds no lone surrogate) or, should a caller pass text from elsewhere, a raw NUL or a
 * lone surrogate (paired ones, as any emoji, are text). A native scan of the text, where
 * the walk of the parsed value (findBadString) cost ~4 µs a job of a 1000-job batch; the
 * walk runs only when this says it may find something.
 */
export function mayHoldBadText(text: string): boolean {
  return text.includes("\\u") || text.includes("\u0000") || !text.isWellFormed();
}

/** The first string (key or value) that is not storable text, with its path ("target.headers.x"). */
export function findBadString(value: unknown, path: string[] = []): { path: string; message: string } | null {
  if (typeof value === "string") {
    const why = badText(value);
    return why ? { path: path.join("."), message: why } : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findBadString(value[i], [...path, String(i)]);
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      const keyWhy = badText(k);
      if (keyWhy) return { path: [...path, "(key)"].join("."), message: `keys ${keyWhy}` };
      const found = findBadString(v, [...path, k]);
      if (found) return found;
    }
  }
  return null;
}

/** A parsed request body, refused when it holds text the database cannot store. */
export function assertStorable(value: unknown): void {
  const bad = findBadString(value);
  if (bad) throw badRequest(`${bad.path || "body"} ${bad.message}`, bad.path || "body");
}

/** Query parameters and the path: a NUL there would reach SQL as a text parameter. */
export function assertStorableUrl(url: string): void {
  const u = new URL(url);
  for (const [k, v] of u.searchParams) {
    const why = badText(k) ?? badText(v);
    if (why) throw badRequest(`${k} ${why}`, k);
  }
  let path: string;
  try {
    path = decodeURIComponent(u.pathname);
  } catch {
    throw badRequest("the request path is not valid percent-encoded UTF-8", "path");
  }
  const why = badText(path);
  if (why) throw badRequest(`the request path ${why}`, "path");
}
