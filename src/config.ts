import * as v from "valibot";
import type { PlannerSettings } from "./dispatcher/dispatch-planner.ts";
import { parseTenantQuotas } from "./dispatcher/tenant-quotas.ts";
import { parseDuration } from "./time/duration.ts";
import { decodeSigningSecret } from "./worker/signature.ts";
import { parseTokens, type TokenGrant } from "./api/tokens.ts";
import { parseByteSize } from "./byte-size.ts";
import { TrustedProxies } from "./api/trusted-proxies.ts";
import { parseTestFaults, type TestFault } from "./store/test-faults.ts";

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
  /**
   * Fair dispatch: class weights, aging, tenant quotas, the global dispatch rate. Every
   * tenant's jobs queued or running are capped by default (flow.tenantDefault.maxRunning:
   * SCHEDULER_TENANT_MAX_RUNNING, else SCHEDULER_TENANT_SHARE of WORKER_CONCURRENCY), so one
   * tenant cannot hold every worker slot.
   */
  flow: PlannerSettings;
  /** Default ceilings on what one tenant may set up (issue 16, hole 8). */
  ceilings: {
    /** Schedules per tenant, at most (a tenant's `schedules=N` in SCHEDULER_TENANT_QUOTAS overrides it). */
    maxSchedules: number;
    schedulesOverrides: Record<string, number>;
    /** A schedule's rule may not fire more often than this (the shortest gap among its next instants). */
    minScheduleIntervalMs: number;
  };
  tokens: TokenGrant[];
  signingKey?: Uint8Array;
  /** Workers reload signing keys at least this often (a change normally arrives by NOTIFY at once). */
  signingKeysRefreshMs: number;
  workerConcurrency: number;
  /** Claimed jobs a worker may hold ready beyond its calls in flight, at most. */
  workerPrefetch: number;
  allowPrivateTargets: boolean;
  /**
   * DNS servers (ip or ip:port) that resolve target hosts for the private-address check and
   * the call; absent: the system resolver (getaddrinfo).
   */
  dnsServers?: string[];
  logLevel: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
  /** auto: one readable line per event when stdout is a terminal, JSON lines otherwise. */
  logFormat: "auto" | "json" | "pretty";
  maxBodyBytes: number;
  /** target bodies larger than this (bytes) are stored once in `payloads` and referenced by hash. */
  payloadInlineMax: number;
  /**
   * How long finished jobs (with their attempts) are kept, per status, and the audit log; null
   * keeps them for ever. Unreferenced payloads go after payloadGraceMs.
   */
  retention: {
    succeededMs: number | null;
    cancelledMs: number | null;
    expiredMs: number | null;
    deadMs: number | null;
    auditMs: number | null;
    payloadGraceMs: number;
    intervalMs: number;
    batch: number;
  };
  /**
   * Failed bearer-token attempts: after maxFailures (0: no limit) from one client within
   * windowMs, that client gets 429 for blockMs. At most maxClients are tracked. The client is
   * the peer address, or the first address in clientIpHeader when set (behind a proxy).
   */
  authFailures: { maxFailures: number; windowMs: number; blockMs: number; maxClients: number; clientIpHeader?: string; trustedProxies: string[] };
  dispatchBatch: number;
  /** How long a worker's claim lasts without renewal. */
  leaseTtlMs: number;
  /**
   * Async jobs: how long an accepted job stays running without a heartbeat from its target
   * (each heartbeat extends it by this much); past it (plus the clock-skew margin) the reaper
   * runs the job again.
   */
  asyncLeaseMs: number;
  /** How long the dispatcher leadership lease lasts without renewal. */
  leaderTtlMs: number;
  /** Extra wait before trusting another node's expired lease: clocks disagree a little. */
  clockSkewMs: number;
  /** Fallback scan interval: a lost notification delays work by at most this. */
  pollIntervalMs: number;
  /** How long a graceful stop waits for in-flight calls before releasing them. */
  shutdownGraceMs: number;
  /** Catch-up occurrences released per second at most per tenant, after downtime; also caps bulk DLQ replays. */
  catchupPerSecond: number;
  /** A dead job that died the same way after this many replays is quarantined. */
  dlqQuarantineAfter: number;
  /** Redis due-time index: how far ahead it holds jobs, its shards and key prefix. */
  index: { windowMs: number; prefix: string; reconcileMs: number };
  jobDefaults: { maxAttempts: number; backoffBaseMs: number; backoffMaxMs: number; timeoutMs: number };
  /**
   * Per target host (host:port), in each worker process: calls per second and calls in flight
   * (undefined: unlimited); a job's or schedule's host_limits override them. A host that
   * answers 429/503 is slowed (halved per throttled answer, never below floorPerSec) and
   * raised back by successes.
   */
  hostLimits: { ratePerSec?: number; concurrency?: number; floorPerSec: number };
  /** Dispatch shards: the due-time space is cut into this many, each held by one dispatcher. */
  shards: number;
  /** How often an api process samples backlog and throughput for the dashboard's charts. */
  statsIntervalMs: number;
  /** Pre-staging: due jobs are claimed this early and held by workers until due (0: off). */
  prestageMs: number;
  /** Worker slots (per worker process) that serve only jobs of at least this priority. */
  reservedSlots?: { slots: number; minPriority: number };
  /** Test only (SCHEDULER_TEST_CLOCK_OFFSET_MS): this process's wall clock is shifted by this much. */
  testClockOffsetMs: number;
  /** Test-only: named queries that fail now and then with a real SQLSTATE (store/test-faults.ts). */
  testFaults: TestFault[];
  /** Test-only (SCHEDULER_TEST_FAULTS_ARMED): whether those faults start armed; SIGUSR2 toggles them. */
  testFaultsArmed: boolean;
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
const size = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return parseByteSize(dataset.value);
      } catch (err) {
        addIssue({ message: (err as Error).message });
        return NEVER;
      }
    }),
    v.minValue(min, `must be at least ${min} bytes`),
    v.maxValue(max, `must be at most ${max} bytes`),
  );
/** A retention period: a duration of at least 1 s, or "0" / "off" to keep for ever (null). */
const retention = v.union(
  [
    v.pipe(v.picklist(["0", "off"]), v.transform(() => null)),
    duration(1000),
  ],
  'must be a duration like "7d" or "12h", or "off" (or 0) to keep for ever',
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
  WORKER_PREFETCH: int(0, 100_000),
  SCHEDULER_ALLOW_PRIVATE_TARGETS: bool,
  SCHEDULER_DNS_SERVERS: v.pipe(
    v.string(),
    v.regex(/^\s*[0-9A-Fa-f.:\[\]]+(\s*,\s*[0-9A-Fa-f.:\[\]]+)*\s*$/, "must be a comma-separated list of IP addresses, each with an optional :port, like 10.0.0.2 or 127.0.0.1:5353"),
    v.transform((s) => s.split(",").map((x) => x.trim())),
  ),
  LOG_LEVEL: v.picklist(["trace", "debug", "info", "warn", "error", "fatal", "silent"], "must be one of trace, debug, info, warn, error, fatal, silent"),
  LOG_FORMAT: v.picklist(["auto", "json", "pretty"], "must be one of auto, json, pretty"),
  SCHEDULER_MAX_BODY_BYTES: size(1024, 1024 ** 3),
  SCHEDULER_PAYLOAD_INLINE_MAX: size(0, 1024 ** 3),
  SCHEDULER_RETENTION_SUCCEEDED: retention,
  SCHEDULER_RETENTION_CANCELLED: retention,
  SCHEDULER_RETENTION_EXPIRED: retention,
  SCHEDULER_RETENTION_DEAD: retention,
  SCHEDULER_RETENTION_AUDIT: retention,
  SCHEDULER_RETENTION_PAYLOAD_GRACE: duration(0),
  SCHEDULER_RETENTION_INTERVAL: duration(100),
  SCHEDULER_RETENTION_BATCH: int(1, 100_000),
  SCHEDULER_AUTH_FAILURE_LIMIT: int(0, 1_000_000),
  SCHEDULER_AUTH_FAILURE_WINDOW: duration(1000),
  SCHEDULER_AUTH_BLOCK: duration(1000),
  SCHEDULER_AUTH_TRACKED_CLIENTS: int(1, 10_000_000),
  SCHEDULER_CLIENT_IP_HEADER: v.pipe(v.string(), v.regex(/^[A-Za-z0-9-]{1,64}$/, "must be a header name like fly-client-ip or x-forwarded-for")),
  SCHEDULER_TRUSTED_PROXIES: v.pipe(
    v.string(),
    v.transform((s) => s.split(",").map((x) => x.trim()).filter(Boolean)),
    v.check((list) => {
      try {
        new TrustedProxies(list);
        return list.length > 0;
      } catch {
        return false;
      }
    }, "must be a comma-separated list of IP addresses or CIDRs, like 172.16.0.0/12,fdaa::/16"),
  ),
  SCHEDULER_DISPATCH_BATCH: int(1, 10_000),
  SCHEDULER_LEASE_TTL: duration(1000),
  SCHEDULER_LEADER_TTL: duration(1000),
  SCHEDULER_ASYNC_LEASE: duration(1000),
  SCHEDULER_CLOCK_SKEW: duration(0),
  SCHEDULER_POLL_INTERVAL: duration(10),
  SCHEDULER_SHUTDOWN_GRACE: duration(0),
  SCHEDULER_DEFAULT_MAX_ATTEMPTS: int(1, 1000),
  SCHEDULER_DEFAULT_TIMEOUT: duration(1),
  SCHEDULER_CATCHUP_RATE: int(1, 1_000_000),
  SCHEDULER_DLQ_QUARANTINE_AFTER: int(1, 1000),
  SCHEDULER_INDEX_WINDOW: duration(1000),
  SCHEDULER_INDEX_RECONCILE: duration(100),
  SCHEDULER_AUTHORITY_TTL: duration(1000),
  SCHEDULER_PRIORITY_WEIGHTS: v.pipe(v.string(), v.regex(/^\s*\d{1,4}\s*,\s*\d{1,4}\s*,\s*\d{1,4}\s*$/, "must be three whole numbers high,normal,low like 8,3,1")),
  SCHEDULER_AGING: duration(1000),
  SCHEDULER_TENANT_MAX_RUNNING: int(1, 10_000_000),
  SCHEDULER_TENANT_SHARE: v.pipe(v.string(), v.regex(/^(0(\.\d{1,4})?|1(\.0{1,4})?)$/, "must be a fraction of WORKER_CONCURRENCY above 0 and at most 1, like 0.5"), v.transform(Number), v.minValue(0.0001, "must be above 0")),
  SCHEDULER_TENANT_MAX_SCHEDULES: int(1, 10_000_000),
  SCHEDULER_MIN_SCHEDULE_INTERVAL: duration(1000),
  SCHEDULER_TENANT_RATE: int(1, 10_000_000),
  SCHEDULER_DISPATCH_RATE: int(1, 10_000_000),
  SCHEDULER_AUTO_FAILOVER: bool,
  SCHEDULER_INDEX_PREFIX: v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.:-]{1,64}$/, "must be 1 to 64 letters, digits, _ . : or -")),
  SCHEDULER_HOST_RATE: v.pipe(v.string(), v.regex(/^\d{1,7}(\.\d{1,6})?$/, "must be calls per second, a number like 5 or 0.5"), v.transform(Number), v.minValue(0.001, "must be at least 0.001"), v.maxValue(1_000_000, "must be at most 1000000")),
  SCHEDULER_HOST_CONCURRENCY: int(1, 10_000),
  SCHEDULER_PRESTAGE: duration(0),
  SCHEDULER_SIGNING_KEYS_REFRESH: duration(100),
  SCHEDULER_STATS_INTERVAL: duration(100),
  SCHEDULER_SHARDS: int(1, 1024),
  SCHEDULER_RESERVED_SLOTS: v.pipe(
    v.string(),
    v.regex(/^\s*\d{1,5}\s*:\s*-?\d{1,9}\s*$/, "must be SLOTS:MIN_PRIORITY, like 10:1 (10 worker slots only for jobs of priority 1 or more)"),
    v.transform((s) => {
      const [slots, min] = s.split(":").map((x) => Number(x.trim()));
      return { slots: slots!, minPriority: min! };
    }),
  ),
  SCHEDULER_TEST_CLOCK_OFFSET_MS: v.pipe(v.string(), v.regex(/^-?\d{1,10}$/, "must be a whole number of milliseconds, like -20000 or 20000"), v.transform(Number)),
  SCHEDULER_HOST_RATE_FLOOR: v.pipe(v.string(), v.regex(/^\d{1,7}(\.\d{1,6})?$/, "must be calls per second, a number like 0.5"), v.transform(Number), v.minValue(0.001, "must be at least 0.001"), v.maxValue(1_000_000, "must be at most 1000000")),
} as const;

type EnvKey = keyof typeof ENV_SCHEMA;

/** Settings that hold a secret: an error names them and never echoes the secret. */
const SECRET_KEYS: ReadonlySet<string> = new Set(["UPSTASH_REDIS_REST_TOKEN", "SCHEDULER_TOKENS", "SCHEDULER_SIGNING_SECRET"]);
const URL_KEYS: ReadonlySet<string> = new Set(["DATABASE_URL", "REDIS_URL", "UPSTASH_REDIS_REST_URL"]);

/** A value as a start-up error may show it: URLs without their password, secrets not at all. */
export function shown(key: string, raw: string): string {
  if (SECRET_KEYS.has(key)) return `[${raw.length} characters, not shown]`;
  if (!URL_KEYS.has(key)) return raw;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    // Not a URL (that may be the error): anything with an @ may hold credentials.
    return raw.includes("@") ? `[${raw.length} characters, not shown]` : raw;
  }
  // An @ that is not before the host ("user:pass@" in the wrong place) may still be a secret.
  if (u.username === "" && u.password === "" && raw.includes("@")) return `[${raw.length} characters, not shown]`;
  if (u.password !== "") u.password = "***";
  for (const k of [...u.searchParams.keys()]) if (/pass|token|secret|key/i.test(k)) u.searchParams.set(k, "***");
  return u.href;
}

function read<K extends EnvKey>(env: Env, key: K): v.InferOutput<(typeof ENV_SCHEMA)[K]> | undefined {
  const raw = env[key];
  if (raw === undefined || (raw === "" && key !== "SCHEDULER_ALLOW_PRIVATE_TARGETS")) return undefined;
  const r = v.safeParse(ENV_SCHEMA[key], raw);
  if (!r.success) throw new ConfigError(`${key} ${r.issues[0].message} (got ${JSON.stringify(shown(key, raw))})`);
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
    // A short token can be guessed, auth limit or not.
    const short = tokens.findIndex((t) => t.token.length < MIN_TOKEN_CHARS);
    if (short >= 0) throw new ConfigError(`SCHEDULER_TOKENS entry ${short + 1}: a token must be at least ${MIN_TOKEN_CHARS} characters (make one with: openssl rand -hex 24)`);
  }
  let signingKey: Uint8Array | undefined;
  if (env.SCHEDULER_SIGNING_SECRET) {
    try {
      signingKey = decodeSigningSecret(env.SCHEDULER_SIGNING_SECRET);
    } catch (err) {
      throw new ConfigError(`SCHEDULER_SIGNING_SECRET ${(err as Error).message}`);
    }
    if (signingKey.length < MIN_SIGNING_KEY_BYTES) {
      throw new ConfigError(`SCHEDULER_SIGNING_SECRET must hold at least ${MIN_SIGNING_KEY_BYTES} bytes of key after whsec_ (it holds ${signingKey.length}); make one with: echo "whsec_$(openssl rand -base64 32)"`);
    }
  }
  const leaseTtlMs = read(env, "SCHEDULER_LEASE_TTL") ?? 30_000;
  const weights = (read(env, "SCHEDULER_PRIORITY_WEIGHTS") ?? "8,3,1").split(",").map((w) => Number(w.trim()));
  if (weights.some((w) => w < 1)) throw new ConfigError(`SCHEDULER_PRIORITY_WEIGHTS must be three whole numbers ≥ 1 (got ${JSON.stringify(env.SCHEDULER_PRIORITY_WEIGHTS)})`);
  let tenantOverrides: ReturnType<typeof parseTenantQuotas> = {};
  if (env.SCHEDULER_TENANT_QUOTAS) {
    try {
      tenantOverrides = parseTenantQuotas(env.SCHEDULER_TENANT_QUOTAS);
    } catch (err) {
      throw new ConfigError(`SCHEDULER_TENANT_QUOTAS ${(err as Error).message}`);
    }
  }
  let testFaults: TestFault[] = [];
  if (env.SCHEDULER_TEST_FAULTS) {
    try {
      testFaults = parseTestFaults(env.SCHEDULER_TEST_FAULTS);
    } catch (err) {
      throw new ConfigError(`SCHEDULER_TEST_FAULTS ${(err as Error).message}`);
    }
  }
  const armed = env.SCHEDULER_TEST_FAULTS_ARMED;
  if (armed !== undefined && armed !== "0" && armed !== "1") throw new ConfigError(`SCHEDULER_TEST_FAULTS_ARMED must be 0 or 1 (got ${JSON.stringify(armed)})`);
  if (armed !== undefined && testFaults.length === 0) throw new ConfigError("SCHEDULER_TEST_FAULTS_ARMED is set without SCHEDULER_TEST_FAULTS: there are no faults to arm");
  const prestageMs = read(env, "SCHEDULER_PRESTAGE") ?? 0;
  if (prestageMs > 60_000) throw new ConfigError(`SCHEDULER_PRESTAGE must be at most 60s: claimed jobs wait in workers' memory until due (got ${JSON.stringify(env.SCHEDULER_PRESTAGE)})`);
  const workerConcurrency = read(env, "WORKER_CONCURRENCY") ?? 100;
  // With tenants (a token limited to one tenant) a tenant may fill this share of a worker's
  // slots by default: 100 calls to a tarpit with a 1 h timeout then hold half the slots, not
  // all of them. Without (only "*" tokens, or none: one operator's jobs) no share applies by
  // default: a cap costs a lone tenant's saturating load its throughput for nothing.
  const share = read(env, "SCHEDULER_TENANT_SHARE");
  const multiTenant = tokens.some((t) => t.tenant !== "*");
  const tenantMaxRunning = read(env, "SCHEDULER_TENANT_MAX_RUNNING")
    ?? (share !== undefined || multiTenant ? Math.max(1, Math.ceil((share ?? 0.5) * workerConcurrency)) : undefined);
  const schedulesOverrides: Record<string, number> = {};
  for (const [tenant, q] of Object.entries(tenantOverrides)) if (q.maxSchedules !== undefined) schedulesOverrides[tenant] = q.maxSchedules;
  const reservedSlots = read(env, "SCHEDULER_RESERVED_SLOTS");
  if (reservedSlots && (reservedSlots.slots < 1 || reservedSlots.slots >= workerConcurrency)) {
    throw new ConfigError(`SCHEDULER_RESERVED_SLOTS must reserve at least 1 and fewer than WORKER_CONCURRENCY (${workerConcurrency}) slots (got ${JSON.stringify(env.SCHEDULER_RESERVED_SLOTS)})`);
  }
  const clientIpHeader = read(env, "SCHEDULER_CLIENT_IP_HEADER")?.toLowerCase();
  const trustedProxies = read(env, "SCHEDULER_TRUSTED_PROXIES") ?? [];
  if (clientIpHeader && trustedProxies.length === 0) {
    throw new ConfigError("SCHEDULER_CLIENT_IP_HEADER needs SCHEDULER_TRUSTED_PROXIES (the addresses of the proxies that set it): from anyone else the header is a name the client picks");
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
    signingKeysRefreshMs: read(env, "SCHEDULER_SIGNING_KEYS_REFRESH") ?? 10_000,
    workerConcurrency,
    workerPrefetch: read(env, "WORKER_PREFETCH") ?? 512,
    allowPrivateTargets: read(env, "SCHEDULER_ALLOW_PRIVATE_TARGETS") ?? false,
    dnsServers: read(env, "SCHEDULER_DNS_SERVERS"),
    logLevel: read(env, "LOG_LEVEL") ?? "info",
    logFormat: read(env, "LOG_FORMAT") ?? "auto",
    maxBodyBytes: read(env, "SCHEDULER_MAX_BODY_BYTES") ?? 10 * 1024 * 1024,
    payloadInlineMax: read(env, "SCHEDULER_PAYLOAD_INLINE_MAX") ?? 64 * 1024,
    retention: {
      succeededMs: keep(read(env, "SCHEDULER_RETENTION_SUCCEEDED"), 7 * DAY),
      cancelledMs: keep(read(env, "SCHEDULER_RETENTION_CANCELLED"), 7 * DAY),
      expiredMs: keep(read(env, "SCHEDULER_RETENTION_EXPIRED"), 7 * DAY),
      deadMs: keep(read(env, "SCHEDULER_RETENTION_DEAD"), 30 * DAY),
      auditMs: keep(read(env, "SCHEDULER_RETENTION_AUDIT"), null),
      payloadGraceMs: read(env, "SCHEDULER_RETENTION_PAYLOAD_GRACE") ?? 3_600_000,
      intervalMs: read(env, "SCHEDULER_RETENTION_INTERVAL") ?? 60_000,
      batch: read(env, "SCHEDULER_RETENTION_BATCH") ?? 500,
    },
    authFailures: {
      maxFailures: read(env, "SCHEDULER_AUTH_FAILURE_LIMIT") ?? 10,
      windowMs: read(env, "SCHEDULER_AUTH_FAILURE_WINDOW") ?? 60_000,
      blockMs: read(env, "SCHEDULER_AUTH_BLOCK") ?? 300_000,
      maxClients: read(env, "SCHEDULER_AUTH_TRACKED_CLIENTS") ?? 10_000,
      clientIpHeader,
      trustedProxies,
    },
    dispatchBatch: read(env, "SCHEDULER_DISPATCH_BATCH") ?? 500,
    leaseTtlMs,
    asyncLeaseMs: read(env, "SCHEDULER_ASYNC_LEASE") ?? 300_000,
    leaderTtlMs: read(env, "SCHEDULER_LEADER_TTL") ?? 10_000,
    clockSkewMs: read(env, "SCHEDULER_CLOCK_SKEW") ?? 2_000,
    pollIntervalMs: read(env, "SCHEDULER_POLL_INTERVAL") ?? 1_000,
    shutdownGraceMs: read(env, "SCHEDULER_SHUTDOWN_GRACE") ?? 25_000,
    catchupPerSecond: read(env, "SCHEDULER_CATCHUP_RATE") ?? 50,
    dlqQuarantineAfter: read(env, "SCHEDULER_DLQ_QUARANTINE_AFTER") ?? 3,
    flow: {
      weights: { high: weights[0]!, normal: weights[1]!, low: weights[2]! },
      agingMs: read(env, "SCHEDULER_AGING") ?? 60_000,
      tenantDefault: { maxRunning: tenantMaxRunning, ratePerSec: read(env, "SCHEDULER_TENANT_RATE") },
      tenantOverrides,
      globalRatePerSec: read(env, "SCHEDULER_DISPATCH_RATE"),
    },
    ceilings: {
      maxSchedules: read(env, "SCHEDULER_TENANT_MAX_SCHEDULES") ?? 1000,
      schedulesOverrides,
      minScheduleIntervalMs: read(env, "SCHEDULER_MIN_SCHEDULE_INTERVAL") ?? 10_000,
    },
    index: {
      windowMs: read(env, "SCHEDULER_INDEX_WINDOW") ?? 3_600_000,
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
    prestageMs,
    reservedSlots,
    statsIntervalMs: read(env, "SCHEDULER_STATS_INTERVAL") ?? 10_000,
    shards: read(env, "SCHEDULER_SHARDS") ?? 16,
    testClockOffsetMs: read(env, "SCHEDULER_TEST_CLOCK_OFFSET_MS") ?? 0,
    testFaults,
    testFaultsArmed: armed !== "0",
  };
}

const DAY = 86_400_000;
export const MIN_TOKEN_CHARS = 32;
export const MIN_SIGNING_KEY_BYTES = 24;
/** undefined (not set) → the default; null ("off") → keep for ever. */
const keep = (v: number | null | undefined, dflt: number | null): number | null => (v === undefined ? dflt : v);

function readFlagPort(raw: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n > 65535) throw new ConfigError(`--port must be a whole number from 0 to 65535 (got ${JSON.stringify(raw)})`);
  return n;
}
