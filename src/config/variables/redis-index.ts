// The variables of the section "Redis due-time index" (the optional Redis due-time index): see ../variables.ts.
import * as v from "valibot";
import { duration, nonEmpty } from "../schemas.ts";
import type { Variable } from "../variable.ts";

export const REDIS_INDEX = {
  REDIS_URL: {
    schema: v.pipe(v.string(), v.regex(/^rediss?:\/\//, "must start with redis:// or rediss://")),
    section: "Redis due-time index",
    readBy: ["dispatcher"],
    url: true,
    shownDefault: "SQL only",
    doc: "the Redis due-time index (`redis://` or `rediss://`)",
    more: "; see [The Redis due-time index](#the-redis-due-time-index-optional)",
  },
  UPSTASH_REDIS_REST_URL: {
    schema: v.pipe(v.string(), v.url("must be an https URL")),
    section: "Redis due-time index",
    readBy: ["dispatcher"],
    url: true,
    doc: "or the index on Upstash over REST, with `UPSTASH_REDIS_REST_TOKEN`",
  },
  UPSTASH_REDIS_REST_TOKEN: {
    schema: nonEmpty,
    secret: true,
    section: "Redis due-time index",
    readBy: ["dispatcher"],
    doc: "the Upstash REST token, with `UPSTASH_REDIS_REST_URL`",
  },
  SCHEDULER_INDEX_WINDOW: {
    schema: duration(1000),
    default: "1h",
    section: "Redis due-time index",
    readBy: ["dispatcher"],
    doc: "how far ahead the index holds jobs (one sorted set per dispatch shard)",
  },
  SCHEDULER_INDEX_PREFIX: {
    schema: v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.:-]{1,64}$/, "must be 1 to 64 letters, digits, _ . : or -")),
    default: "scheduler",
    section: "Redis due-time index",
    readBy: ["dispatcher"],
    doc: "the index's key prefix",
  },
  SCHEDULER_INDEX_RECONCILE: {
    schema: duration(100),
    default: "2s",
    section: "Redis due-time index",
    readBy: ["dispatcher"],
    doc: "how often the SQL pass looks for due jobs the index missed",
    more: "; such a job is claimed at most 0.5 s + this + one pass after its due time",
  },
} as const satisfies Record<string, Variable>;
