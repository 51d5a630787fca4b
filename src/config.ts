import * as v from "valibot";
import type { PlannerSettings } from "./dispatcher/dispatch-planner.ts";
import { parseTenantQuotas } from "./dispatcher/tenant-quotas.ts";
import { parseDuration } from "./time/duration.ts";
import { decodeSigningSecret } from "./worker/signature.ts";
import { parseTokens, type TokenGrant } from "./api/tokens.ts";

export type Mode = "all" | "api" | "dispatcher" | "worker";

export interface Config {
  mode: Mode;
  port: number;
  host: string;
  databaseUrl?: string;
  dataDir: string;
  redisUrl?: string;
  upstash?: { url: string; token: string };
  region: string;
  homeRegion: string;
  /** Region authority lease: its TTL, and whether a standby takes over when it lapses. */
  authorityTtlMs: number;
  autoFailover: boolean;
  /** Fair dispatch: class weights, aging, tenant quotas, the global dispatch rate. */
  flow: PlannerSettings;
  tokens: TokenGrant[];
  signingKey?: Uint8Array;
  workerConcurrency: number;
  allowPrivateTargets: boolean;
  logLevel: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
  maxBodyBytes: number;
  dispatchBatch: number;
  /** How long a worker's claim lasts without renewal. */
  leaseTtlMs: number;
  /** How long the dispatcher leadership lease lasts without renewal. */
  leaderTtlMs: number;
  /** Extra wait before trusting another node's expired lease: clocks disagree a little. */
  clockSkewMs: number;
  /** Fallback scan interval: a lost notification delays work by at most this. */
  pollIntervalMs: number;
  /** How long a graceful stop waits for in-flight calls before releasing them. */
  shutdownGraceMs: number;
  /** Catch-up occurrences released per second at most, after downtime; also caps bulk DLQ replays. */
  catchupPerSecond: number;
  /** A dead job that died the same way after this many replays is quarantined. */
  dlqQuarantineAfter: number;
  /** Redis due-time index: how far ahead it holds jobs, its shards and key prefix. */
  index: { windowMs: number; shards: number; prefix: string; reconcileMs: number };
  jobDefaults: { maxAttempts: number; backoffBaseMs: number; backoffMaxMs: number; timeoutMs: number };
  /**
   * Per target host (host:port), in each worker process: calls per second and calls in flight
   * (undefined: unlimited); a job's or schedule's host_limits override them. A host that
   * answers 429/503 is slowed (halved per throttled answer, never below floorPerSec) and
   * raised back by successes.
   */
  hostLimits: { ratePerSec?: number; concurrency?: number; floorPerSec: number };
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

type Env = Record<string, string | undefined>;

const int = (min: number, max: number) =>
  v.pipe(v.string(), v.regex(/^\d+$/, `must be a whole number from ${min} to ${max}`), v.transform(Number), v.minValue(min, `must be at least ${min}`), v.maxValue(max, `must be at most ${max}`));
const duration = (minMs: number) =>
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return parseDuration(dataset.value);
      } catch {
        addIssue({ message: `must be a duration like "250ms", "30s", "5m" or whole milliseconds` });
        return NEVER;
      }
    }),
    v.minValue(minMs, `must be at least ${minMs} ms`),
  );
const bool = v.pipe(v.picklist(["0", "1", "true", "false", ""], 'must be "1" or "0"'), v.transform((s) => s === "1" || s === "true"));

/** Each variable with its schema; the first problem found is reported by name. */
const ENV_SCHEMA = {
  PORT: int(0, 65535),
  HOST: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  DATABASE_URL: v.pipe(v.string(), v.regex(/^postgres(ql)?:\/\//, "must start with postgres:// or postgresql://")),
  SCHEDULER_DATA_DIR: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  REDIS_URL: v.pipe(v.string(), v.regex(/^rediss?:\/\//, "must start with redis:// or rediss://")),
  UPSTASH_REDIS_REST_URL: v.pipe(v.string(), v.url("must be an https URL")),
  UPSTASH_REDIS_REST_TOKEN: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  REGION: v.pipe(v.string(), v.regex(/^[a-z0-9-]{1,32}$/, "must be a region name like iad or local")),
  HOME_REGION: v.pipe(v.string(), v.regex(/^[a-z0-9-]{1,32}$/, "must be a region name like iad or local")),
  WORKER_CONCURRENCY: int(1, 10_000),
  SCHEDULER_ALLOW_PRIVATE_TARGETS: bool,
  LOG_LEVEL: v.picklist(["trace", "debug", "info", "warn", "error", "fatal", "silent"], "must be one of trace, debug, info, warn, error, fatal, silent"),
  SCHEDULER_MAX_BODY_BYTES: int(1024, 1024 * 1024 * 1024),
  SCHEDULER_DISPATCH_BATCH: int(1, 10_000),
  SCHEDULER_LEASE_TTL: duration(1000),
  SCHEDULER_LEADER_TTL: duration(1000),
  SCHEDULER_CLOCK_SKEW: duration(0),
  SCHEDULER_POLL_INTERVAL: duration(10),
  SCHEDULER_SHUTDOWN_GRACE: duration(0),
  SCHEDULER_DEFAULT_MAX_ATTEMPTS: int(1, 1000),
  SCHEDULER_DEFAULT_TIMEOUT: duration(1),
  SCHEDULER_CATCHUP_RATE: int(1, 1_000_000),
  SCHEDULER_DLQ_QUARANTINE_AFTER: int(1, 1000),
  SCHEDULER_INDEX_WINDOW: duration(1000),
  SCHEDULER_INDEX_SHARDS: int(1, 1024),
  SCHEDULER_INDEX_RECONCILE: duration(100),
  SCHEDULER_AUTHORITY_TTL: duration(1000),
  SCHEDULER_PRIORITY_WEIGHTS: v.pipe(v.string(), v.regex(/^\s*\d{1,4}\s*,\s*\d{1,4}\s*,\s*\d{1,4}\s*$/, "must be three whole numbers high,normal,low like 8,3,1")),
  SCHEDULER_AGING: duration(1000),
  SCHEDULER_TENANT_MAX_RUNNING: int(1, 10_000_000),
  SCHEDULER_TENANT_RATE: int(1, 10_000_000),
  SCHEDULER_DISPATCH_RATE: int(1, 10_000_000),
  SCHEDULER_AUTO_FAILOVER: bool,
  SCHEDULER_INDEX_PREFIX: v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.:-]{1,64}$/, "must be 1 to 64 letters, digits, _ . : or -")),
  SCHEDULER_HOST_RATE: v.pipe(v.string(), v.regex(/^\d{1,7}(\.\d{1,6})?$/, "must be calls per second, a number like 5 or 0.5"), v.transform(Number), v.minValue(0.001, "must be at least 0.001"), v.maxValue(1_000_000, "must be at most 1000000")),
  SCHEDULER_HOST_CONCURRENCY: int(1, 10_000),
  SCHEDULER_HOST_RATE_FLOOR: v.pipe(v.string(), v.regex(/^\d{1,7}(\.\d{1,6})?$/, "must be calls per second, a number like 0.5"), v.transform(Number), v.minValue(0.001, "must be at least 0.001"), v.maxValue(1_000_000, "must be at most 1000000")),
} as const;

type EnvKey = keyof typeof ENV_SCHEMA;

function read<K extends EnvKey>(env: Env, key: K): v.InferOutput<(typeof ENV_SCHEMA)[K]> | undefined {
  const raw = env[key];
  if (raw === undefined || (raw === "" && key !== "SCHEDULER_ALLOW_PRIVATE_TARGETS")) return undefined;
  const r = v.safeParse(ENV_SCHEMA[key], raw);
  if (!r.success) throw new ConfigError(`${key} ${r.issues[0].message} (got ${JSON.stringify(raw)})`);
  return r.output as v.InferOutput<(typeof ENV_SCHEMA)[K]>;
}

export interface Flags {
  mode?: string;
  port?: string;
  region?: string;
}

/** env + flags → one validated Config. Throws ConfigError with one line naming the variable. */
export function loadConfig(env: Env, flags: Flags = {}): Config {
  const mode = flags.mode ?? "all";
  if (!["all", "api", "dispatcher", "worker"].includes(mode)) {
    throw new ConfigError(`--mode must be one of all, api, dispatcher, worker (got ${JSON.stringify(mode)})`);
  }
  const port = flags.port !== undefined ? readFlagPort(flags.port) : (read(env, "PORT") ?? 8080);
  const region = flags.region ?? read(env, "REGION") ?? (env.FLY_REGION || "local");
  if (!/^[a-z0-9-]{1,32}$/.test(region)) throw new ConfigError(`--region must be a region name like iad or local (got ${JSON.stringify(region)})`);
  const upstashUrl = read(env, "UPSTASH_REDIS_REST_URL");
  const upstashToken = read(env, "UPSTASH_REDIS_REST_TOKEN");
  if (!!upstashUrl !== !!upstashToken) {
    throw new ConfigError(`UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN must be set together`);
  }
  let tokens: TokenGrant[] = [];
  if (env.SCHEDULER_TOKENS) {
    try {
      tokens = parseTokens(env.SCHEDULER_TOKENS);
    } catch (err) {
      throw new ConfigError(`SCHEDULER_TOKENS ${(err as Error).message}`);
    }
  }
  let signingKey: Uint8Array | undefined;
  if (env.SCHEDULER_SIGNING_SECRET) {
    try {
      signingKey = decodeSigningSecret(env.SCHEDULER_SIGNING_SECRET);
    } catch (err) {
      throw new ConfigError(`SCHEDULER_SIGNING_SECRET ${(err as Error).message}`);
    }
  }
  const leaseTtlMs = read(env, "SCHEDULER_LEASE_TTL") ?? 30_000;
  const weights = (read(env, "SCHEDULER_PRIORITY_WEIGHTS") ?? "8,3,1").split(",").map((w) => Number(w.trim()));
  if (weights.some((w) => w < 1)) throw new ConfigError(`SCHEDULER_PRIORITY_WEIGHTS must be three whole numbers ≥ 1 (got ${JSON.stringify(env.SCHEDULER_PRIORITY_WEIGHTS)})`);
  let tenantOverrides = {};
  if (env.SCHEDULER_TENANT_QUOTAS) {
    try {
      tenantOverrides = parseTenantQuotas(env.SCHEDULER_TENANT_QUOTAS);
    } catch (err) {
      throw new ConfigError(`SCHEDULER_TENANT_QUOTAS ${(err as Error).message}`);
    }
  }
  return {
    mode: mode as Mode,
    port,
    host: read(env, "HOST") ?? "0.0.0.0",
    databaseUrl: read(env, "DATABASE_URL"),
    dataDir: read(env, "SCHEDULER_DATA_DIR") ?? "./data",
    redisUrl: read(env, "REDIS_URL"),
    upstash: upstashUrl && upstashToken ? { url: upstashUrl, token: upstashToken } : undefined,
    region,
    homeRegion: read(env, "HOME_REGION") ?? (env.PRIMARY_REGION || region),
    authorityTtlMs: read(env, "SCHEDULER_AUTHORITY_TTL") ?? 30_000,
    autoFailover: read(env, "SCHEDULER_AUTO_FAILOVER") ?? true,
    tokens,
    signingKey,
    workerConcurrency: read(env, "WORKER_CONCURRENCY") ?? 100,
    allowPrivateTargets: read(env, "SCHEDULER_ALLOW_PRIVATE_TARGETS") ?? false,
    logLevel: read(env, "LOG_LEVEL") ?? "info",
    maxBodyBytes: read(env, "SCHEDULER_MAX_BODY_BYTES") ?? 10 * 1024 * 1024,
    dispatchBatch: read(env, "SCHEDULER_DISPATCH_BATCH") ?? 500,
    leaseTtlMs,
    leaderTtlMs: read(env, "SCHEDULER_LEADER_TTL") ?? 10_000,
    clockSkewMs: read(env, "SCHEDULER_CLOCK_SKEW") ?? 2_000,
    pollIntervalMs: read(env, "SCHEDULER_POLL_INTERVAL") ?? 1_000,
    shutdownGraceMs: read(env, "SCHEDULER_SHUTDOWN_GRACE") ?? 25_000,
    catchupPerSecond: read(env, "SCHEDULER_CATCHUP_RATE") ?? 50,
    dlqQuarantineAfter: read(env, "SCHEDULER_DLQ_QUARANTINE_AFTER") ?? 3,
    flow: {
      weights: { high: weights[0]!, normal: weights[1]!, low: weights[2]! },
      agingMs: read(env, "SCHEDULER_AGING") ?? 60_000,
      tenantDefault: { maxRunning: read(env, "SCHEDULER_TENANT_MAX_RUNNING"), ratePerSec: read(env, "SCHEDULER_TENANT_RATE") },
      tenantOverrides,
      globalRatePerSec: read(env, "SCHEDULER_DISPATCH_RATE"),
    },
    index: {
      windowMs: read(env, "SCHEDULER_INDEX_WINDOW") ?? 3_600_000,
      shards: read(env, "SCHEDULER_INDEX_SHARDS") ?? 8,
      prefix: read(env, "SCHEDULER_INDEX_PREFIX") ?? "scheduler",
      reconcileMs: read(env, "SCHEDULER_INDEX_RECONCILE") ?? 2_000,
    },
    jobDefaults: {
      maxAttempts: read(env, "SCHEDULER_DEFAULT_MAX_ATTEMPTS") ?? 5,
      backoffBaseMs: 1_000,
      backoffMaxMs: 3_600_000,
      timeoutMs: read(env, "SCHEDULER_DEFAULT_TIMEOUT") ?? 30_000,
    },
    hostLimits: {
      ratePerSec: read(env, "SCHEDULER_HOST_RATE"),
      concurrency: read(env, "SCHEDULER_HOST_CONCURRENCY"),
      floorPerSec: read(env, "SCHEDULER_HOST_RATE_FLOOR") ?? 0.5,
    },
  };
}

function readFlagPort(raw: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n > 65535) throw new ConfigError(`--port must be a whole number from 0 to 65535 (got ${JSON.stringify(raw)})`);
  return n;
}
