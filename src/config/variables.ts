// Every environment variable the scheduler reads, one row each: how its value is checked
// (a valibot schema over the raw string), its default (a raw string, checked by that same
// schema, so the documented default is the one in force), which modes read it, and what it
// means. loadConfig (src/config.ts) reads the environment through this table; `--help` and the
// README's Configuration section are rendered from it (src/config/docs.ts; `npm run
// gen:config-docs` rewrites the README, test/unit/config-table.test.ts fails when it is stale).
import * as v from "valibot";
import { parseTokens } from "../api/tokens.ts";
import { TrustedProxies } from "../api/trusted-proxies.ts";
import { parseTenantQuotas } from "../dispatcher/tenant-quotas.ts";
import { parseTestFaults } from "../store/test-faults.ts";
import { decodeSigningSecret } from "../worker/signature.ts";
import { bool, duration, int, nonEmpty, parsedBy, rate, regionName, retention, size } from "./schemas.ts";

export type ServerMode = "api" | "dispatcher" | "worker";

export const SECTIONS = [
  "Storage, HTTP and logs",
  "API and auth",
  "Calls (workers)",
  "Dispatch",
  "Flow control",
  "Retention",
  "Regions",
  "Redis due-time index",
  "Test only (never in production)",
] as const;
export type Section = (typeof SECTIONS)[number];

export interface Variable {
  schema: v.GenericSchema<string, unknown>;
  section: Section;
  /** The modes whose processes act on it. */
  readBy: "all" | readonly ServerMode[];
  /** One line, for --help and the README (backticks mark names and values). */
  doc: string;
  /** More for the README's table only. */
  more?: string;
  /** The raw value in force when the variable is unset (or empty), parsed by `schema`. */
  default?: string;
  /** How to document a default that is computed or absent ("unlimited"). */
  shownDefault?: string;
  /** Holds a secret: an error never shows the value. */
  secret?: true;
  /** A URL: an error shows it without its password. */
  url?: true;
  /** The schema's messages quote the bad entry themselves: the whole value is not echoed. */
  quiet?: true;
  /** An empty value is a value (checked), not "unset". */
  emptyIsSet?: true;
  /** A command-line flag that, when given, replaces the variable (which is then not read). */
  flag?: "port" | "region";
}

export const MIN_TOKEN_CHARS = 32;
export const MIN_SIGNING_KEY_BYTES = 24;

/** Tokens parsed, and refused if short: a short token can be guessed, auth limit or not. */
function tokens(raw: string) {
  const grants = parseTokens(raw);
  const short = grants.findIndex((t) => t.token.length < MIN_TOKEN_CHARS);
  if (short >= 0) throw new Error(`entry ${short + 1}: a token must be at least ${MIN_TOKEN_CHARS} characters (make one with: openssl rand -hex 24)`);
  return grants;
}

function signingSecret(raw: string): Uint8Array {
  const key = decodeSigningSecret(raw);
  if (key.length < MIN_SIGNING_KEY_BYTES) {
    throw new Error(
      `must hold at least ${MIN_SIGNING_KEY_BYTES} bytes of key after whsec_ (it holds ${key.length}); make one with: echo "whsec_$(openssl rand -base64 32)"`,
    );
  }
  return key;
}

/** A tenant's running quota, as a share of WORKER_CONCURRENCY, when some token is limited to one tenant. */
export const TENANT_SHARE_WITH_TENANTS = 0.5;

const DISPATCH_AND_WORK = ["dispatcher", "worker"] as const;

export const VARIABLES = {
  // Storage, HTTP and logs
  DATABASE_URL: {
    schema: v.pipe(v.string(), v.regex(/^postgres(ql)?:\/\//, "must start with postgres:// or postgresql://")),
    section: "Storage, HTTP and logs",
    readBy: "all",
    url: true,
    doc: "PostgreSQL (`postgres://…`); unset: embedded PGlite in `SCHEDULER_DATA_DIR`",
  },
  SCHEDULER_DATA_DIR: {
    schema: nonEmpty,
    default: "./data",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "embedded database directory; locked, one process at a time",
  },
  PORT: {
    schema: int(0, 65535),
    default: "8080",
    flag: "port",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "HTTP port (`--port` overrides it)",
    more: "; every mode serves `/healthz`, `/readyz`, `/metrics`",
  },
  HOST: {
    schema: nonEmpty,
    default: "0.0.0.0",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "HTTP listen address",
  },
  LOG_LEVEL: {
    schema: v.picklist(["trace", "debug", "info", "warn", "error", "fatal", "silent"], "must be one of trace, debug, info, warn, error, fatal, silent"),
    default: "info",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "`trace`, `debug`, `info`, `warn`, `error`, `fatal` or `silent`",
    more: "; JSON lines carry `job_id` on job events",
  },
  LOG_FORMAT: {
    schema: v.picklist(["auto", "json", "pretty"], "must be one of auto, json, pretty"),
    default: "auto",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "`auto`: readable lines on a terminal, JSON lines otherwise; or `json`, `pretty`",
    more: " (see [Logs](#logs))",
  },

  // API and auth
  SCHEDULER_TOKENS: {
    schema: parsedBy(tokens),
    secret: true,
    quiet: true,
    section: "API and auth",
    readBy: "all",
    shownDefault: "loopback only",
    doc: "API tokens, `token:tenant:scope,scope;…`, each of 32+ characters",
    more: "; unset: the API serves loopback clients only, without a token (see [Auth](#auth)). With a token limited to one tenant, `SCHEDULER_TENANT_SHARE` applies by default",
  },
  SCHEDULER_AUTH_FAILURE_LIMIT: {
    schema: int(0, 1_000_000),
    default: "10",
    section: "API and auth",
    readBy: "all",
    doc: "failed auth attempts per client per window (`0`: no limit)",
  },
  SCHEDULER_AUTH_FAILURE_WINDOW: {
    schema: duration(1000),
    default: "1m",
    section: "API and auth",
    readBy: "all",
    doc: "the window those failed attempts are counted in",
  },
  SCHEDULER_AUTH_BLOCK: {
    schema: duration(1000),
    default: "5m",
    section: "API and auth",
    readBy: "all",
    doc: "how long a client over the limit is refused (429)",
  },
  SCHEDULER_AUTH_TRACKED_CLIENTS: {
    schema: int(1, 10_000_000),
    default: "10000",
    section: "API and auth",
    readBy: "all",
    doc: "clients tracked at most (memory bound)",
  },
  SCHEDULER_CLIENT_IP_HEADER: {
    schema: v.pipe(
      v.string(),
      v.regex(/^[A-Za-z0-9-]{1,64}$/, "must be a header name like fly-client-ip or x-forwarded-for"),
      v.transform((s) => s.toLowerCase()),
    ),
    section: "API and auth",
    readBy: "all",
    doc: "header naming the client behind a proxy, e.g. `fly-client-ip`",
    more: "; needs `SCHEDULER_TRUSTED_PROXIES`",
  },
  SCHEDULER_TRUSTED_PROXIES: {
    schema: v.pipe(
      v.string(),
      v.transform((s) =>
        s
          .split(",")
          .map((x) => x.trim())
          .filter(Boolean),
      ),
      v.check((list) => {
        try {
          new TrustedProxies(list);
          return list.length > 0;
        } catch {
          return false;
        }
      }, "must be a comma-separated list of IP addresses or CIDRs, like 172.16.0.0/12,fdaa::/16"),
    ),
    section: "API and auth",
    readBy: "all",
    doc: "IPs/CIDRs of the proxies whose client header is believed",
    more: ", e.g. `172.16.0.0/12,fdaa::/16`",
  },
  SCHEDULER_MAX_BODY_BYTES: {
    schema: size(1024, 1024 ** 3),
    default: "10MiB",
    section: "API and auth",
    readBy: ["api"],
    doc: "largest request body (bytes or `64KiB`/`10MiB`/`1MB`); larger: 413",
  },
  SCHEDULER_PAYLOAD_INLINE_MAX: {
    schema: size(0, 1024 ** 3),
    default: "64KiB",
    section: "API and auth",
    readBy: ["api"],
    doc: "target bodies larger than this are stored once, by reference",
  },
  SCHEDULER_DEFAULT_MAX_ATTEMPTS: {
    schema: int(1, 1000),
    default: "5",
    section: "API and auth",
    readBy: ["api"],
    doc: "a job's attempts when it names none",
  },
  SCHEDULER_DEFAULT_TIMEOUT: {
    schema: duration(1),
    default: "30s",
    section: "API and auth",
    readBy: ["api"],
    doc: "a job's call timeout when it names none",
  },
  SCHEDULER_TENANT_MAX_SCHEDULES: {
    schema: int(1, 10_000_000),
    default: "1000",
    section: "API and auth",
    readBy: ["api"],
    doc: "schedules one tenant may have (beyond: 409 `schedule_quota_exceeded`)",
  },
  SCHEDULER_MIN_SCHEDULE_INTERVAL: {
    schema: duration(1000),
    default: "10s",
    section: "API and auth",
    readBy: ["api"],
    doc: "a schedule's rule may fire at most this often (≥ `1s`)",
    more: "; `1s` allows per-second rules",
  },
  SCHEDULER_DLQ_QUARANTINE_AFTER: {
    schema: int(1, 1000),
    default: "3",
    section: "API and auth",
    readBy: ["api"],
    doc: "replays after which a job that keeps dying the same way is quarantined",
  },
  SCHEDULER_STATS_INTERVAL: {
    schema: duration(100),
    default: "10s",
    section: "API and auth",
    readBy: ["api"],
    doc: "how often backlog and throughput are sampled for the dashboard",
    more: " (`GET /v1/stats`'s history)",
  },

  // Calls (workers)
  WORKER_CONCURRENCY: {
    schema: int(1, 10_000),
    default: "100",
    section: "Calls (workers)",
    readBy: "all",
    doc: "calls in flight per worker process",
    more: "; also sizes the database pool, and the default tenant share",
  },
  WORKER_PREFETCH: {
    schema: int(0, 100_000),
    default: "512",
    section: "Calls (workers)",
    readBy: ["worker"],
    doc: "claimed jobs a worker may hold ready beyond its calls in flight, at most",
    more: " (it holds about 250 ms of calls, and at least `WORKER_CONCURRENCY` if this allows); `0`: it claims only for free call slots. In `--mode=all` with 16+ slots and no host limits, reserved slots or pre-staging, claims take only what starts at once (see [How it works](#how-it-works)) and hold nothing beyond",
  },
  SCHEDULER_ALLOW_PRIVATE_TARGETS: {
    schema: bool,
    default: "0",
    section: "Calls (workers)",
    readBy: ["api", "worker"],
    doc: "`1` allows loopback and private-network targets",
  },
  SCHEDULER_DNS_SERVERS: {
    schema: v.pipe(
      v.string(),
      v.regex(
        /^\s*[0-9A-Fa-f.:[\]]+(\s*,\s*[0-9A-Fa-f.:[\]]+)*\s*$/,
        "must be a comma-separated list of IP addresses, each with an optional :port, like 10.0.0.2 or 127.0.0.1:5353",
      ),
      v.transform((s) => s.split(",").map((x) => x.trim())),
    ),
    section: "Calls (workers)",
    readBy: ["api", "worker"],
    shownDefault: "system resolver",
    doc: "`ip[:port],…`: DNS servers for target hosts (the check and the call)",
  },
  SCHEDULER_SIGNING_SECRET: {
    schema: parsedBy(signingSecret),
    secret: true,
    quiet: true,
    section: "Calls (workers)",
    readBy: ["worker"],
    doc: "`whsec_…` (24+ bytes of key): signs calls whose schedule and tenant have no keys",
    more: " (Standard Webhooks); see [Signing keys per tenant](#signing-keys-per-tenant)",
  },
  SCHEDULER_SIGNING_KEYS_REFRESH: {
    schema: duration(100),
    default: "10s",
    section: "Calls (workers)",
    readBy: ["worker"],
    doc: "workers reload signing keys at least this often",
    more: " (a change normally reaches them by NOTIFY within milliseconds)",
  },
  SCHEDULER_ASYNC_LEASE: {
    schema: duration(1000),
    default: "5m",
    section: "Calls (workers)",
    readBy: ["api", "worker"],
    doc: "an accepted async job's lease; each heartbeat renews it",
    more: " (heartbeat every third or so)",
  },
  SCHEDULER_HOST_RATE: {
    schema: rate("5 or 0.5"),
    section: "Calls (workers)",
    readBy: ["worker"],
    shownDefault: "unlimited",
    doc: "calls per second per target host, per worker process (decimals allowed)",
  },
  SCHEDULER_HOST_CONCURRENCY: {
    schema: int(1, 10_000),
    section: "Calls (workers)",
    readBy: ["worker"],
    shownDefault: "unlimited",
    doc: "calls in flight per target host, per worker process",
  },
  SCHEDULER_HOST_RATE_FLOOR: {
    schema: rate("0.5"),
    default: "0.5",
    section: "Calls (workers)",
    readBy: ["worker"],
    doc: "a host slowed by 429/503 is never paced below this many calls per second",
    more: " (or its own limit, if lower)",
  },
  SCHEDULER_SHUTDOWN_GRACE: {
    schema: duration(0),
    default: "25s",
    section: "Calls (workers)",
    readBy: ["worker"],
    doc: "how long a graceful stop waits for calls in flight",
  },

  // Dispatch
  SCHEDULER_DISPATCH_BATCH: {
    schema: int(1, 10_000),
    default: "500",
    section: "Dispatch",
    readBy: ["dispatcher"],
    doc: "jobs per dispatcher claim",
  },
  SCHEDULER_LEASE_TTL: {
    schema: duration(1000),
    default: "30s",
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "a worker's claim on a job without renewal (renewed every third)",
  },
  SCHEDULER_LEADER_TTL: {
    schema: duration(1000),
    default: "10s",
    section: "Dispatch",
    readBy: ["dispatcher"],
    doc: "the dispatch coordinator lease and each shard lease (renewed every third)",
  },
  SCHEDULER_CLOCK_SKEW: {
    schema: duration(0),
    default: "2s",
    section: "Dispatch",
    readBy: "all",
    doc: "extra wait before another node's expired lease is taken",
  },
  SCHEDULER_POLL_INTERVAL: {
    schema: duration(10),
    default: "1s",
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "fallback scan interval: a lost notification delays work at most this much",
  },
  SCHEDULER_SHARDS: {
    schema: int(1, 1024),
    default: "16",
    section: "Dispatch",
    readBy: "all",
    doc: "dispatch shards (1–1024); change it only with every dispatcher stopped",
    more: "; shared by the home region's dispatchers (see [Sharded dispatch](#sharded-dispatch))",
  },
  SCHEDULER_CATCHUP_RATE: {
    schema: int(1, 1_000_000),
    default: "50",
    section: "Dispatch",
    readBy: ["api", "dispatcher"],
    doc: "catch-up occurrences released per second at most, per tenant",
    more: "; also the cap of a bulk replay's `rate_per_sec`",
  },
  SCHEDULER_PRESTAGE: {
    schema: v.pipe(duration(0), v.maxValue(60_000, "must be at most 60s: claimed jobs wait in workers' memory until due")),
    default: "0s",
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "claim due jobs this early (≤ `60s`); workers hold them until due",
    more: " (see [Flow control](#flow-control-priority-fairness-quotas))",
  },
  SCHEDULER_RESERVED_SLOTS: {
    schema: v.pipe(
      v.string(),
      v.regex(/^\s*\d{1,5}\s*:\s*-?\d{1,9}\s*$/, "must be SLOTS:MIN_PRIORITY, like 10:1 (10 worker slots only for jobs of priority 1 or more)"),
      v.transform((s) => {
        const [slots, min] = s.split(":").map((x) => Number(x.trim()));
        return { slots: slots!, minPriority: min! };
      }),
    ),
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "`SLOTS:MIN_PRIORITY`, e.g. `10:5`: worker slots only jobs of that priority or more use",
  },

  // Flow control
  SCHEDULER_PRIORITY_WEIGHTS: {
    schema: v.pipe(
      v.string(),
      v.regex(/^\s*\d{1,4}\s*,\s*\d{1,4}\s*,\s*\d{1,4}\s*$/, "must be three whole numbers high,normal,low like 8,3,1"),
      v.transform((s) => s.split(",").map((w) => Number(w.trim()))),
      v.check((ws) => ws.every((w) => w >= 1), "must be three whole numbers ≥ 1"),
      v.transform(([high, normal, low]) => ({ high: high!, normal: normal!, low: low! })),
    ),
    default: "8,3,1",
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "shares of the high, normal and low classes in each dispatch batch",
  },
  SCHEDULER_AGING: {
    schema: duration(1000),
    default: "1m",
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "a waiting job rises one priority class per this much lateness",
  },
  SCHEDULER_TENANT_MAX_RUNNING: {
    schema: int(1, 10_000_000),
    section: "Flow control",
    readBy: ["dispatcher"],
    shownDefault: "see `SCHEDULER_TENANT_SHARE`",
    doc: "every tenant's quota of jobs queued or running at once",
  },
  SCHEDULER_TENANT_SHARE: {
    schema: v.pipe(
      v.string(),
      v.regex(/^(0(\.\d{1,4})?|1(\.0{1,4})?)$/, "must be a fraction of WORKER_CONCURRENCY above 0 and at most 1, like 0.5"),
      v.transform(Number),
      v.minValue(0.0001, "must be above 0"),
    ),
    section: "Flow control",
    readBy: ["dispatcher"],
    shownDefault: `\`${TENANT_SHARE_WITH_TENANTS}\` with tenant tokens`,
    doc: "a tenant's quota as a share of `WORKER_CONCURRENCY`, if no `SCHEDULER_TENANT_MAX_RUNNING`",
    more: " (rounded up). Applies by default when `SCHEDULER_TOKENS` has a token limited to one tenant; with only `*` tokens or none, only when set",
  },
  SCHEDULER_TENANT_RATE: {
    schema: int(1, 10_000_000),
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "every tenant's dispatches per second",
  },
  SCHEDULER_TENANT_QUOTAS: {
    schema: parsedBy(parseTenantQuotas),
    quiet: true,
    section: "Flow control",
    readBy: ["api", "dispatcher"],
    doc: "per-tenant overrides, `acme:running=50,rate=100;beta:rate=10,schedules=5000`",
  },
  SCHEDULER_DISPATCH_RATE: {
    schema: int(1, 10_000_000),
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "dispatches per second across all tenants",
  },

  // Retention
  SCHEDULER_RETENTION_SUCCEEDED: {
    schema: retention,
    default: "7d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "keep succeeded jobs this long; `off` or `0`: for ever",
  },
  SCHEDULER_RETENTION_CANCELLED: {
    schema: retention,
    default: "7d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for cancelled jobs",
  },
  SCHEDULER_RETENTION_EXPIRED: {
    schema: retention,
    default: "7d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for expired jobs",
  },
  SCHEDULER_RETENTION_DEAD: {
    schema: retention,
    default: "30d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for dead jobs",
  },
  SCHEDULER_RETENTION_AUDIT: {
    schema: retention,
    default: "off",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for the audit log",
  },
  SCHEDULER_RETENTION_PAYLOAD_GRACE: {
    schema: duration(0),
    default: "1h",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "unreferenced payloads are kept this long after last use",
  },
  SCHEDULER_RETENTION_INTERVAL: {
    schema: duration(100),
    default: "1m",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "pruning pass interval",
  },
  SCHEDULER_RETENTION_BATCH: {
    schema: int(1, 100_000),
    default: "500",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "rows deleted per statement",
  },

  // Regions
  REGION: {
    schema: regionName,
    flag: "region",
    section: "Regions",
    readBy: "all",
    shownDefault: "`FLY_REGION`, else `local`",
    doc: "this process's region (`--region` overrides it)",
  },
  HOME_REGION: {
    schema: regionName,
    section: "Regions",
    readBy: "all",
    shownDefault: "`PRIMARY_REGION`, else `REGION`",
    doc: "seeds the region authority on the very first start",
    more: " (after that the database says where home is)",
  },
  SCHEDULER_AUTHORITY_TTL: {
    schema: duration(1000),
    default: "30s",
    section: "Regions",
    readBy: "all",
    doc: "the region authority lease, renewed by the home dispatch leader every third",
  },
  SCHEDULER_AUTO_FAILOVER: {
    schema: bool,
    default: "1",
    section: "Regions",
    readBy: ["dispatcher"],
    doc: "a standby takes the authority once its lease lapsed (+ `SCHEDULER_CLOCK_SKEW`)",
    more: "; `0`: moves are manual only",
  },

  // Redis due-time index
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

  // Test only
  SCHEDULER_TEST_CLOCK_OFFSET_MS: {
    schema: v.pipe(v.string(), v.regex(/^-?\d{1,10}$/, "must be a whole number of milliseconds, like -20000 or 20000"), v.transform(Number)),
    default: "0",
    section: "Test only (never in production)",
    readBy: "all",
    doc: "shifts this process's wall clock (`Date.now()`, `new Date()`) by this many ms",
    more: ", as on a host whose clock is off; warned about at start",
  },
  SCHEDULER_TEST_FAULTS: {
    schema: parsedBy(parseTestFaults),
    quiet: true,
    section: "Test only (never in production)",
    readBy: "all",
    doc: "`Name=SQLSTATE@probability,…`: named queries fail now and then",
    more: ", e.g. `ExpireCoalesced=40P01@0.2,CompleteAttempts=55P03@0.05`: before the named query (`-- name:` in `sql/queries`) runs, with that probability the server raises that SQLSTATE on the same connection, as a real deadlock or lock timeout would; counted in `scheduler_test_faults_injected_total{query,code}`, warned about at start",
  },
  SCHEDULER_TEST_FAULTS_ARMED: {
    schema: v.pipe(
      v.picklist(["0", "1"], "must be 0 or 1"),
      v.transform((s) => s !== "0"),
    ),
    default: "1",
    emptyIsSet: true,
    section: "Test only (never in production)",
    readBy: "all",
    doc: "with `SCHEDULER_TEST_FAULTS`: `0` starts them disarmed; `SIGUSR2` toggles them",
    more: " in the running process (logged), so a test makes one process's queries fail for a while without restarting it",
  },
} as const satisfies Record<string, Variable>;

export type VariableName = keyof typeof VARIABLES;
export const VARIABLE_NAMES = Object.keys(VARIABLES) as VariableName[];

/**
 * SCHEDULER_* names that are not the server's but share its environment, so start-up lets
 * them be: the CLI's own (`scheduler status`, `scheduler jobs …`), the test suite's and the
 * benches' switches (bench/lib/scheduler-process.ts and scripts/with-services.sh pass
 * environments along).
 */
export const OTHER_PROGRAMS: Record<string, string> = {
  SCHEDULER_URL: "the CLI's scheduler address",
  SCHEDULER_TOKEN: "the CLI's bearer token",
  SCHEDULER_LONG_TESTS: "the test suite's long forms",
};
export const OTHER_PROGRAMS_PREFIX = "SCHEDULER_BENCH_";
