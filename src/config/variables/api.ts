// The variables of the section "API and auth" (the HTTP API: tokens, limits, proxies): see ../variables.ts.
import * as v from "valibot";
import { TrustedProxies } from "../../api/trusted-proxies.ts";
import { parseTokens } from "../../api/tokens.ts";
import { duration, int, parsedBy, size } from "../schemas.ts";
import type { Variable } from "../variable.ts";

export const MIN_TOKEN_CHARS = 32;

/** Tokens parsed, and refused if short: a short token can be guessed, auth limit or not. */
function tokens(raw: string) {
  const grants = parseTokens(raw);
  const short = grants.findIndex((t) => t.token.length < MIN_TOKEN_CHARS);
  if (short >= 0) throw new Error(`entry ${short + 1}: a token must be at least ${MIN_TOKEN_CHARS} characters (make one with: openssl rand -hex 24)`);
  return grants;
}

export const API_AND_AUTH = {
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
} as const satisfies Record<string, Variable>;
