import * as v from "valibot";
import { type CronRule, CronRuleError, keptRule } from "../time/cron-rule.ts";
import { badRequest } from "./errors.ts";
import { IF_VERSION } from "./request.ts";
import { durationField, HostLimitsSchema, VerifySchema, instantField, MAX_ASYNC_TIMEOUT_MS, RetrySchema, TargetSchema } from "./job-input.ts";

const DAY = 86_400_000;

// '@' separates the schedule id from the nominal time in occurrence keys.
export const SCHEDULE_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

const fields = {
  cron: v.pipe(v.string("must be a cron expression string"), v.minLength(1, "must not be empty"), v.maxLength(256, "must be at most 256 characters")),
  timezone: v.pipe(v.string("must be an IANA time zone like America/New_York"), v.maxLength(64, "must be at most 64 characters")),
  target: TargetSchema,
  retry: RetrySchema,
  timeout: durationField(MAX_ASYNC_TIMEOUT_MS),
  priority: v.pipe(
    v.number("must be a number"),
    v.integer("must be a whole number"),
    v.minValue(-1000, "must be at least -1000"),
    v.maxValue(1000, "must be at most 1000"),
  ),
  misfire: v.picklist(["skip", "fire_once", "fire_all"], "must be skip, fire_once or fire_all"),
  misfire_grace: v.nullable(durationField(7 * DAY)),
  catchup_window: durationField(366 * DAY),
  overlap: v.picklist(["allow", "skip", "queue"], "must be allow, skip or queue"),
  max_queued: v.pipe(
    v.number("must be a number"),
    v.integer("must be a whole number"),
    v.minValue(1, "must be at least 1"),
    v.maxValue(1000, "must be at most 1000"),
  ),
  window: durationField(DAY),
  paused: v.boolean("must be true or false"),
  dst: v.strictObject({
    gap: v.optional(v.picklist(["shift", "skip"], "must be shift or skip")),
    fold: v.optional(v.picklist(["first", "last", "both"], "must be first, last or both")),
  }),
  start_at: v.nullable(instantField),
  end_at: v.nullable(instantField),
  host_limits: HostLimitsSchema,
  async: v.boolean("must be true or false"),
  verify: VerifySchema,
};

const optionalAll = <T extends Record<string, v.GenericSchema>>(o: T) =>
  Object.fromEntries(Object.entries(o).map(([k, s]) => [k, v.optional(s)])) as { [K in keyof T]: v.OptionalSchema<T[K], undefined> };

export const ScheduleCreateSchema = v.strictObject({
  ...optionalAll(fields),
  id: v.optional(v.pipe(v.string("must be a string"), v.regex(SCHEDULE_ID, "must be 1 to 128 letters, digits, _ . : or -"))),
  cron: fields.cron,
  target: fields.target,
  tenant: v.optional(v.pipe(v.string("must be a string"), v.regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1 to 64 letters, digits, _ . or -"))),
});

export const SchedulePatchSchema = v.strictObject({
  ...optionalAll(fields),
  if_version: IF_VERSION,
  reason: v.optional(v.pipe(v.string("must be a string"), v.maxLength(1000, "must be at most 1000 characters"))),
});

/** The rule (kept by its spec: keptRule), its errors turned into 400s that name the field. */
export function ruleOrThrow(cron: string, timezone: string, dst: { gap?: "shift" | "skip" | null; fold?: "first" | "last" | "both" | null }): CronRule {
  try {
    return keptRule({ cron, timezone, dst: { gap: dst.gap ?? undefined, fold: dst.fold ?? undefined } });
  } catch (err) {
    if (err instanceof CronRuleError) throw badRequest(err.message, err.field);
    throw err;
  }
}

/** The first fire instant at or after max(now, start_at), within end_at; null if none. */
export function firstFire(rule: CronRule, nowMs: number, startAt: Date | null, endAt: Date | null): Date | null {
  const from = Math.max(nowMs, startAt ? startAt.getTime() - 1 : nowMs);
  const next = rule.nextAfter(from);
  if (next === null || (endAt && next > endAt.getTime())) return null;
  return new Date(next);
}

/** Instants sampled for a rule's shortest gap: dense rules show it at once, and it bounds the cost. */
const GAP_SAMPLES = 32;

/**
 * A rule may not fire more often than minMs (SCHEDULER_MIN_SCHEDULE_INTERVAL): the shortest
 * gap among its next GAP_SAMPLES instants from now. 400 naming `cron` otherwise.
 */
export function checkInterval(rule: CronRule, nowMs: number, minMs: number): void {
  const at = rule.next(GAP_SAMPLES, nowMs);
  for (let i = 1; i < at.length; i++) {
    const gap = at[i]! - at[i - 1]!;
    if (gap < minMs) {
      throw badRequest(
        `cron fires ${gap / 1000} s apart (at ${new Date(at[i - 1]!).toISOString()} and ${new Date(at[i]!).toISOString()}); schedules may fire at most every ${minMs / 1000} s (SCHEDULER_MIN_SCHEDULE_INTERVAL)`,
        "cron",
      );
    }
  }
}
