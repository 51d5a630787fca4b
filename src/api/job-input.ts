import * as v from "valibot";
import { createHash } from "node:crypto";
import { parseDuration } from "../time/duration.ts";
import { targetUrlSyntax } from "../worker/target-guard.ts";
import type { HostLimits, Target } from "../store/types.ts";
import { badRequest } from "./errors.ts";

const INSTANT = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})$/;
/** `<schedule_id>@<RFC 3339 instant in UTC>`: the idempotency key of a schedule occurrence. */
export const OCCURRENCE_KEY = /^[A-Za-z0-9_.:-]{1,128}@\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const MAX_INSTANT_MS = Date.UTC(10000, 0, 1);
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] as const;
// Headers the scheduler sets itself, or that fetch computes; a job may not override them.
// proxy-* and expect change what the connection does (credentials for a proxy, a 100-continue
// handshake the target may never answer).
const RESERVED_HEADER =
  /^(host|content-length|transfer-encoding|connection|upgrade|te|trailer|keep-alive|expect|proxy-.*|webhook-id|webhook-timestamp|webhook-signature|idempotency-key|scheduler-.*)$/i;
/** What fetch sends unchanged: visible ASCII, space and tab (RFC 9110 field-value without obs-text). */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;
export const MAX_HEADER_VALUE_BYTES = 8192;
const MAX_DURATION_MS = 366 * 86_400_000;
/** timeout is a per-call limit for synchronous jobs, an execution ceiling for async ones. */
export const MAX_SYNC_TIMEOUT_MS = 3_600_000;
export const MAX_ASYNC_TIMEOUT_MS = 7 * 86_400_000;

export const durationField = (max: number) =>
  v.pipe(
    v.union([v.string(), v.number()], 'must be a duration like "30s" or whole milliseconds'),
    // Before the transform: the OpenAPI document describes the input up to the first transform.
    v.description(`A duration: "250ms", "30s", "5m", "2h", "1d" or whole milliseconds (at most ${max} ms).`),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        const ms = parseDuration(dataset.value);
        if (ms > max) {
          addIssue({ message: `must be at most ${max} ms` });
          return NEVER;
        }
        return ms;
      } catch {
        // Not the parser's message: it quotes the input, and errors do not echo what was sent.
        addIssue({ message: 'must be a duration like "250ms", "30s", "5m", "2h", "1d" or whole milliseconds, not negative' });
        return NEVER;
      }
    }),
  );

function fieldsInRange(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2}))?/.exec(s);
  if (!m) return true; // valibot runs every check of a pipe: the format check reports this one
  const [y, mo, d, h, mi, se] = m.slice(1).map((x) => Number(x ?? 0));
  const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  return mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth && h <= 23 && mi <= 59 && se <= 59;
}

export const instantField = v.pipe(
  v.string("must be an RFC 3339 instant like 2026-12-01T09:00:00Z"),
  v.regex(INSTANT, "must be an RFC 3339 instant with an offset or Z, like 2026-12-01T09:00:00Z"),
  v.description("An RFC 3339 instant with an offset or Z, like 2026-12-01T09:00:00Z."),
  // Date rolls impossible fields over (Feb 30 → Mar 2, 24:00 → next day): refuse them instead.
  v.check(fieldsInRange, "is not a real date and time"),
  v.transform((s) => new Date(s)),
  v.check((d) => !Number.isNaN(d.getTime()), "is not a real date"),
  // Years before 1970 (0001 was stored and echoed as 2001) or past 9999 are nobody's schedule.
  v.check((d) => d.getTime() >= 0 && d.getTime() < MAX_INSTANT_MS, "must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"),
);

export const TargetSchema = v.strictObject({
  url: v.pipe(
    v.string("must be a URL string"),
    v.maxLength(2048, "must be at most 2048 characters"),
    v.check(
      (u) => targetUrlSyntax(u) === null,
      (i) => targetUrlSyntax(String(i.input)) ?? "invalid URL",
    ),
  ),
  method: v.optional(
    v.pipe(
      v.string(),
      v.description(`One of ${METHODS.join(", ")} (any case).`),
      v.transform((m) => m.toUpperCase()),
      v.picklist(METHODS, `must be one of ${METHODS.join(", ")}`),
    ),
    "POST",
  ),
  headers: v.optional(
    v.pipe(
      v.record(
        v.pipe(
          v.string(),
          v.maxLength(256, "must be at most 256 characters"),
          v.regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "is not a valid header name"),
          v.check((k) => !RESERVED_HEADER.test(k), "is set by the scheduler and cannot be overridden"),
        ),
        v.pipe(
          v.string("header values must be strings"),
          v.check((s) => !/[\r\n\0]/.test(s), "must not contain line breaks"),
          // A value fetch would refuse must fail here, not as a call that never leaves.
          v.check((s) => HEADER_VALUE.test(s), "must be visible ASCII characters, spaces and tabs only"),
          v.maxLength(MAX_HEADER_VALUE_BYTES, `must be at most ${MAX_HEADER_VALUE_BYTES} characters`),
        ),
      ),
      v.check((h) => Object.keys(h).length <= 100, "must have at most 100 headers"),
    ),
    {},
  ),
  body: v.optional(v.unknown()),
  body_text: v.optional(v.string("must be a string")),
});

/**
 * Verify before retry (README "Verify before retry"): the URL the scheduler asks (signed GET, same webhook-id)
 * whether a call whose outcome is unknown was processed, before calling again. null: none.
 */
export const VerifySchema = v.nullable(
  v.strictObject({
    url: v.pipe(
      v.string("must be a URL string"),
      v.maxLength(2048, "must be at most 2048 characters"),
      v.description('Answers GET with 200 {"processed": true} when the call with this webhook-id was processed; 404 or {"processed": false} when not.'),
      v.check(
        (u) => targetUrlSyntax(u) === null,
        (i) => targetUrlSyntax(String(i.input)) ?? "invalid URL",
      ),
    ),
  }),
);

export const RetrySchema = v.strictObject({
  max_attempts: v.optional(
    v.pipe(v.number("must be a number"), v.integer("must be a whole number"), v.minValue(1, "must be at least 1"), v.maxValue(1000, "must be at most 1000")),
  ),
  base: v.optional(durationField(86_400_000)),
  max: v.optional(durationField(7 * 86_400_000)),
});

/**
 * Limits for calls to the target's host (host:port): calls per second and calls in flight, in
 * each worker process. They replace SCHEDULER_HOST_RATE / SCHEDULER_HOST_CONCURRENCY for this
 * job, and pace only its own tenant's calls to that host (the tightest among that tenant's jobs
 * there); other tenants' calls to the host are not slowed by them.
 * null: none (the settings apply).
 */
export const HostLimitsSchema = v.nullable(
  v.pipe(
    v.unknown(),
    // valibot takes an array for an object (its indexes become unknown keys).
    v.check((x) => typeof x === "object" && x !== null && !Array.isArray(x), 'must be a JSON object like { "rate": 5, "concurrency": 2 }'),
    v.strictObject({
      rate: v.optional(
        v.pipe(
          v.number("must be a number of calls per second"),
          v.check((n) => Number.isFinite(n) && n >= 0.001, "must be at least 0.001"),
          v.maxValue(1_000_000, "must be at most 1000000"),
        ),
      ),
      concurrency: v.optional(
        v.pipe(
          v.number("must be a number"),
          v.integer("must be a whole number"),
          v.minValue(1, "must be at least 1"),
          v.maxValue(10_000, "must be at most 10000"),
        ),
      ),
    }),
    v.check((l) => l.rate !== undefined || l.concurrency !== undefined, "must give rate, concurrency or both (null for none)"),
  ),
);

export const JobInputSchema = v.strictObject({
  target: TargetSchema,
  run_at: v.optional(instantField),
  delay: v.optional(durationField(MAX_DURATION_MS * 10)),
  idempotency_key: v.optional(
    v.pipe(
      v.string("must be a string"),
      v.minLength(1, "must not be empty"),
      v.maxLength(255, "must be at most 255 characters"),
      // Otherwise a job could take a schedule occurrence's key and that occurrence never run.
      v.check((k) => !OCCURRENCE_KEY.test(k), "has the form <schedule_id>@<instant>, which is reserved for schedule occurrences"),
    ),
  ),
  priority: v.optional(
    v.pipe(
      v.number("must be a number"),
      v.integer("must be a whole number"),
      v.minValue(-1000, "must be at least -1000"),
      v.maxValue(1000, "must be at most 1000"),
    ),
    0,
  ),
  retry: v.optional(RetrySchema, {}),
  timeout: v.optional(durationField(MAX_ASYNC_TIMEOUT_MS)),
  expires_at: v.optional(instantField),
  window: v.optional(durationField(86_400_000), 0),
  async: v.optional(v.boolean("must be true or false"), false),
  tenant: v.optional(v.pipe(v.string("must be a string"), v.regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1 to 64 letters, digits, _ . or -"))),
  host_limits: v.optional(HostLimitsSchema),
  verify: v.optional(VerifySchema),
});

export type JobInput = v.InferOutput<typeof JobInputSchema>;

/** timeout up to 7 days is an async job's execution ceiling; a synchronous call gets at most 1 h. */
export function checkTimeout(isAsync: boolean, timeoutMs: number | undefined, path: string): void {
  if (!isAsync && timeoutMs !== undefined && timeoutMs > MAX_SYNC_TIMEOUT_MS) {
    throw badRequest(`timeout must be at most ${MAX_SYNC_TIMEOUT_MS} ms (1h) for a synchronous job; an async job's may be up to 7 days`, path);
  }
}

/** valibot issues → our 400 with the field path, like "target.url". */
export function parseOrThrow<S extends v.GenericSchema>(schema: S, data: unknown, prefix = ""): v.InferOutput<S> {
  const r = v.safeParse(schema, data);
  if (r.success) return r.output;
  const issue = r.issues[0];
  const path = [prefix, ...(issue.path ?? []).map((p) => String(p.key))].filter(Boolean).join(".");
  const objectIssue = issue.kind === "schema" && (issue.type === "strict_object" || issue.type === "object");
  // valibot's own messages end "but received <the input>": errors do not echo what was sent.
  const message =
    objectIssue && issue.expected === "never"
      ? `unknown field ${path}`
      : objectIssue && issue.path && issue.received === "undefined"
        ? `${path} is required`
        : objectIssue
          ? `${path || "body"} must be a JSON object`
          : `${path || "body"} ${/^Invalid (type|key): /.test(issue.message) ? `must be ${issue.expected}` : issue.message}`;
  // Every 400 names where: the whole body when no field is at fault.
  throw badRequest(message, path || "body");
}

/** `prefix` is where the job sits in the request ("jobs.3" in a batch), for the error path. */
export function toTarget(t: JobInput["target"], prefix = ""): Target {
  const at = (f: string) => [prefix, f].filter(Boolean).join(".");
  if (t.body !== undefined && t.body_text !== undefined) throw badRequest("target: give body or body_text, not both", at("target.body_text"));
  if ((t.method === "GET" || t.method === "HEAD") && (t.body !== undefined || t.body_text !== undefined)) {
    throw badRequest(
      `target: a ${t.method} call carries no body; drop body/body_text or use POST`,
      at(t.body !== undefined ? "target.body" : "target.body_text"),
    );
  }
  if (t.body_text !== undefined) return { url: t.url, method: t.method, headers: t.headers, body: t.body_text, json: false };
  if (t.body !== undefined) return { url: t.url, method: t.method, headers: t.headers, body: JSON.stringify(t.body), json: true };
  return { url: t.url, method: t.method, headers: t.headers, body: null, json: false };
}

/** Canonical JSON (sorted keys) of the request as sent, for comparing repeats of one key. */
export function requestHash(raw: unknown): string {
  const canon = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(canon)
      : x && typeof x === "object"
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, canon((x as Record<string, unknown>)[k])]),
          )
        : x;
  return createHash("sha256")
    .update(JSON.stringify(canon(raw)))
    .digest("hex");
}

/** host_limits as stored: null, or only the limits given. */
export function toHostLimits(l: v.InferOutput<typeof HostLimitsSchema> | undefined): HostLimits | null {
  if (!l) return null;
  const out: HostLimits = {};
  if (l.rate !== undefined) out.rate = l.rate;
  if (l.concurrency !== undefined) out.concurrency = l.concurrency;
  return out;
}
