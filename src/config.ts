// Configuration, parsed once at start-up and passed down. What each environment variable
// accepts, defaults to and means is in one table (config/variables.ts); this file turns the
// values read through it into a Config and applies the rules that span several variables.
import type { TokenGrant } from "./api/tokens.ts";
import { readEnv, type Env } from "./config/read-env.ts";
import { TENANT_SHARE_WITH_TENANTS, type VariableName } from "./config/variables.ts";
import type { PlannerSettings } from "./dispatcher/dispatch-planner.ts";
import type { TestFault } from "./store/test-faults.ts";

export { shown } from "./config/shown.ts";
export { MIN_SIGNING_KEY_BYTES, MIN_TOKEN_CHARS } from "./config/variables.ts";

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
  /** Schedules' occurrences are made this early, each due at its nominal time (0: at the instant). */
  occurrenceLeadMs: number;
  /** Worker slots (per worker process) that serve only jobs of at least this priority. */
  reservedSlots?: { slots: number; minPriority: number };
  /** Test only (SCHEDULER_TEST_CLOCK_OFFSET_MS): this process's wall clock is shifted by this much. */
  testClockOffsetMs: number;
  /** Test-only: named queries that fail now and then with a real SQLSTATE (store/test-faults.ts). */
  testFaults: TestFault[];
  /** Test-only (SCHEDULER_TEST_FAULTS_ARMED): whether those faults start armed; SIGUSR2 toggles them. */
  testFaultsArmed: boolean;
}

/** Every problem with the configuration, one line each naming the variable (or flag) and what to do. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(readonly problems: string[]) {
    super(problems.join("\n"));
  }
}

export interface Flags {
  mode?: string;
  port?: string;
  region?: string;
}

const MODES: readonly string[] = ["all", "api", "dispatcher", "worker"];
const REGION_NAME = /^[a-z0-9-]{1,32}$/;

/** env + flags → one validated Config. Throws ConfigError listing every problem, one line each. */
export function loadConfig(env: Env, flags: Flags = {}): Config {
  const problems: string[] = [];
  const mode = flags.mode ?? "all";
  if (!MODES.includes(mode)) problems.push(`--mode must be one of all, api, dispatcher, worker (got ${JSON.stringify(mode)})`);
  if (flags.port !== undefined && (!/^\d+$/.test(flags.port) || Number(flags.port) > 65535)) {
    problems.push(`--port must be a whole number from 0 to 65535 (got ${JSON.stringify(flags.port)})`);
  }
  // A flag replaces its variable, which is then not read (nor refused).
  const flagged = new Set<VariableName>();
  if (flags.port !== undefined) flagged.add("PORT");
  if (flags.region !== undefined) flagged.add("REGION");
  const { values: e, set, failed, problems: envProblems } = readEnv(env, flagged);
  problems.push(...envProblems);

  const region = flags.region ?? e.REGION ?? (env.FLY_REGION || "local");
  if (!failed.has("REGION") && !REGION_NAME.test(region)) {
    problems.push(
      flags.region !== undefined
        ? `--region must be a region name like iad or local (got ${JSON.stringify(region)})`
        : `FLY_REGION must be a region name like iad or local (got ${JSON.stringify(region)}); set REGION to name this process's region`,
    );
  }
  // Rules across variables; one that involves a refused variable says nothing more.
  const rule = (names: VariableName[], broken: () => unknown, message: () => string) => {
    if (!names.some((n) => failed.has(n)) && broken()) problems.push(message());
  };
  rule(
    ["UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN"],
    () => !!e.UPSTASH_REDIS_REST_URL !== !!e.UPSTASH_REDIS_REST_TOKEN,
    () => "UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN must be set together",
  );
  rule(
    ["SCHEDULER_TEST_FAULTS_ARMED", "SCHEDULER_TEST_FAULTS"],
    () => set.has("SCHEDULER_TEST_FAULTS_ARMED") && (e.SCHEDULER_TEST_FAULTS ?? []).length === 0,
    () => "SCHEDULER_TEST_FAULTS_ARMED is set without SCHEDULER_TEST_FAULTS: there are no faults to arm",
  );
  rule(
    ["SCHEDULER_RESERVED_SLOTS", "WORKER_CONCURRENCY"],
    () => e.SCHEDULER_RESERVED_SLOTS && (e.SCHEDULER_RESERVED_SLOTS.slots < 1 || e.SCHEDULER_RESERVED_SLOTS.slots >= e.WORKER_CONCURRENCY),
    () =>
      `SCHEDULER_RESERVED_SLOTS must reserve at least 1 and fewer than WORKER_CONCURRENCY (${e.WORKER_CONCURRENCY}) slots (got ${JSON.stringify(env.SCHEDULER_RESERVED_SLOTS)})`,
  );
  rule(
    ["SCHEDULER_CLIENT_IP_HEADER", "SCHEDULER_TRUSTED_PROXIES"],
    () => e.SCHEDULER_CLIENT_IP_HEADER && (e.SCHEDULER_TRUSTED_PROXIES ?? []).length === 0,
    () =>
      "SCHEDULER_CLIENT_IP_HEADER needs SCHEDULER_TRUSTED_PROXIES (the addresses of the proxies that set it): from anyone else the header is a name the client picks",
  );
  if (problems.length > 0) throw new ConfigError(problems);

  const tokens = e.SCHEDULER_TOKENS ?? [];
  const workerConcurrency = e.WORKER_CONCURRENCY;
  // With tenants (a token limited to one tenant) a tenant may fill this share of a worker's
  // slots by default: 100 calls to a tarpit with a 1 h timeout then hold half the slots, not
  // all of them. Without (only "*" tokens, or none: one operator's jobs) no share applies by
  // default: a cap costs a lone tenant's saturating load its throughput for nothing.
  const share = e.SCHEDULER_TENANT_SHARE;
  const multiTenant = tokens.some((t) => t.tenant !== "*");
  const tenantMaxRunning =
    e.SCHEDULER_TENANT_MAX_RUNNING ??
    (share !== undefined || multiTenant ? Math.max(1, Math.ceil((share ?? TENANT_SHARE_WITH_TENANTS) * workerConcurrency)) : undefined);
  const tenantOverrides = e.SCHEDULER_TENANT_QUOTAS ?? {};
  const schedulesOverrides: Record<string, number> = {};
  for (const [tenant, q] of Object.entries(tenantOverrides)) if (q.maxSchedules !== undefined) schedulesOverrides[tenant] = q.maxSchedules;
  return {
    mode: mode as Mode,
    port: flags.port !== undefined ? Number(flags.port) : e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.SCHEDULER_DATA_DIR,
    redisUrl: e.REDIS_URL,
    upstash: e.UPSTASH_REDIS_REST_URL && e.UPSTASH_REDIS_REST_TOKEN ? { url: e.UPSTASH_REDIS_REST_URL, token: e.UPSTASH_REDIS_REST_TOKEN } : undefined,
    region,
    homeRegion: e.HOME_REGION ?? (env.PRIMARY_REGION || region),
    authorityTtlMs: e.SCHEDULER_AUTHORITY_TTL,
    autoFailover: e.SCHEDULER_AUTO_FAILOVER,
    tokens,
    signingKey: e.SCHEDULER_SIGNING_SECRET,
    signingKeysRefreshMs: e.SCHEDULER_SIGNING_KEYS_REFRESH,
    workerConcurrency,
    workerPrefetch: e.WORKER_PREFETCH,
    allowPrivateTargets: e.SCHEDULER_ALLOW_PRIVATE_TARGETS,
    dnsServers: e.SCHEDULER_DNS_SERVERS,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    maxBodyBytes: e.SCHEDULER_MAX_BODY_BYTES,
    payloadInlineMax: e.SCHEDULER_PAYLOAD_INLINE_MAX,
    retention: {
      succeededMs: e.SCHEDULER_RETENTION_SUCCEEDED,
      cancelledMs: e.SCHEDULER_RETENTION_CANCELLED,
      expiredMs: e.SCHEDULER_RETENTION_EXPIRED,
      deadMs: e.SCHEDULER_RETENTION_DEAD,
      auditMs: e.SCHEDULER_RETENTION_AUDIT,
      payloadGraceMs: e.SCHEDULER_RETENTION_PAYLOAD_GRACE,
      intervalMs: e.SCHEDULER_RETENTION_INTERVAL,
      batch: e.SCHEDULER_RETENTION_BATCH,
    },
    authFailures: {
      maxFailures: e.SCHEDULER_AUTH_FAILURE_LIMIT,
      windowMs: e.SCHEDULER_AUTH_FAILURE_WINDOW,
      blockMs: e.SCHEDULER_AUTH_BLOCK,
      maxClients: e.SCHEDULER_AUTH_TRACKED_CLIENTS,
      clientIpHeader: e.SCHEDULER_CLIENT_IP_HEADER,
      trustedProxies: e.SCHEDULER_TRUSTED_PROXIES ?? [],
    },
    dispatchBatch: e.SCHEDULER_DISPATCH_BATCH,
    leaseTtlMs: e.SCHEDULER_LEASE_TTL,
    asyncLeaseMs: e.SCHEDULER_ASYNC_LEASE,
    leaderTtlMs: e.SCHEDULER_LEADER_TTL,
    clockSkewMs: e.SCHEDULER_CLOCK_SKEW,
    pollIntervalMs: e.SCHEDULER_POLL_INTERVAL,
    shutdownGraceMs: e.SCHEDULER_SHUTDOWN_GRACE,
    catchupPerSecond: e.SCHEDULER_CATCHUP_RATE,
    dlqQuarantineAfter: e.SCHEDULER_DLQ_QUARANTINE_AFTER,
    flow: {
      weights: e.SCHEDULER_PRIORITY_WEIGHTS,
      agingMs: e.SCHEDULER_AGING,
      tenantDefault: { maxRunning: tenantMaxRunning, ratePerSec: e.SCHEDULER_TENANT_RATE },
      tenantOverrides,
      globalRatePerSec: e.SCHEDULER_DISPATCH_RATE,
    },
    ceilings: {
      maxSchedules: e.SCHEDULER_TENANT_MAX_SCHEDULES,
      schedulesOverrides,
      minScheduleIntervalMs: e.SCHEDULER_MIN_SCHEDULE_INTERVAL,
    },
    index: {
      windowMs: e.SCHEDULER_INDEX_WINDOW,
      prefix: e.SCHEDULER_INDEX_PREFIX,
      reconcileMs: e.SCHEDULER_INDEX_RECONCILE,
    },
    jobDefaults: {
      maxAttempts: e.SCHEDULER_DEFAULT_MAX_ATTEMPTS,
      backoffBaseMs: 1_000,
      backoffMaxMs: 3_600_000,
      timeoutMs: e.SCHEDULER_DEFAULT_TIMEOUT,
    },
    hostLimits: {
      ratePerSec: e.SCHEDULER_HOST_RATE,
      concurrency: e.SCHEDULER_HOST_CONCURRENCY,
      floorPerSec: e.SCHEDULER_HOST_RATE_FLOOR,
    },
    prestageMs: e.SCHEDULER_PRESTAGE,
    occurrenceLeadMs: e.SCHEDULER_OCCURRENCE_LEAD,
    reservedSlots: e.SCHEDULER_RESERVED_SLOTS,
    statsIntervalMs: e.SCHEDULER_STATS_INTERVAL,
    shards: e.SCHEDULER_SHARDS,
    testClockOffsetMs: e.SCHEDULER_TEST_CLOCK_OFFSET_MS,
    testFaults: e.SCHEDULER_TEST_FAULTS ?? [],
    testFaultsArmed: e.SCHEDULER_TEST_FAULTS_ARMED,
  };
}
