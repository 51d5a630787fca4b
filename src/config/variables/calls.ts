// The variables of the section "Calls (workers)" (what a worker does when it calls a target): see ../variables.ts.
import * as v from "valibot";
import { decodeSigningSecret } from "../../worker/signature.ts";
import { bool, duration, int, parsedBy, rate } from "../schemas.ts";
import type { Variable } from "../variable.ts";

export const MIN_SIGNING_KEY_BYTES = 24;

function signingSecret(raw: string): Uint8Array {
  const key = decodeSigningSecret(raw);
  if (key.length < MIN_SIGNING_KEY_BYTES) {
    throw new Error(
      `must hold at least ${MIN_SIGNING_KEY_BYTES} bytes of key after whsec_ (it holds ${key.length}); make one with: echo "whsec_$(openssl rand -base64 32)"`,
    );
  }
  return key;
}

export const CALLS = {
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
} as const satisfies Record<string, Variable>;
