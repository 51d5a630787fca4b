import { promises as dnsPromises } from "node:dns";
import { isIP } from "node:net";
import { BoundedMap } from "../bounded-map.ts";

export class TargetRefusedError extends Error {
  readonly code = "target_refused";
  /** The forbidden address, for the log only: told to the tenant it maps their internal names. */
  constructor(
    message: string,
    readonly address?: string,
  ) {
    super(message);
    this.name = "TargetRefusedError";
  }
}

type Cidr = readonly [base: number, prefix: number];

// Private, loopback, link-local (incl. cloud metadata 169.254.169.254), CGNAT, benchmarking,
// multicast and reserved space: nothing a public webhook target should live in.
const FORBIDDEN_V4: readonly Cidr[] = [
  [v4(0, 0, 0, 0), 8],
  [v4(10, 0, 0, 0), 8],
  [v4(100, 64, 0, 0), 10],
  [v4(127, 0, 0, 0), 8],
  [v4(169, 254, 0, 0), 16],
  [v4(172, 16, 0, 0), 12],
  [v4(192, 0, 0, 0), 24],
  [v4(192, 0, 2, 0), 24], // TEST-NET-1..3: documentation, never a real target
  [v4(198, 51, 100, 0), 24],
  [v4(203, 0, 113, 0), 24],
  [v4(192, 168, 0, 0), 16],
  [v4(198, 18, 0, 0), 15],
  [v4(224, 0, 0, 0), 4],
  [v4(240, 0, 0, 0), 4], // also covers 255.255.255.255
];

const FORBIDDEN_HOSTNAMES = new Set(["localhost", "metadata.google.internal"]);

function v4(a: number, b: number, c: number, d: number): number {
  return ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
}

function inCidr(addr: number, [base, prefix]: Cidr): boolean {
  const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
  return (addr & mask) >>> 0 === base;
}

function parseV4(s: string): number | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  let out = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out = out * 256 + n;
  }
  return out;
}

/** Eight 16-bit words, or null. Accepts "::" compression, a dotted IPv4 tail and a %zone suffix. */
function parseV6(input: string): number[] | null {
  const s = input.split("%")[0];
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const words = (part: string): number[] | null => {
    if (part === "") return [];
    const out: number[] = [];
    const groups = part.split(":");
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i];
      if (i === groups.length - 1 && g.includes(".")) {
        const n = parseV4(g);
        if (n === null) return null;
        out.push(n >>> 16, n & 0xffff);
      } else if (/^[0-9a-fA-F]{1,4}$/.test(g)) {
        out.push(parseInt(g, 16));
      } else {
        return null;
      }
    }
    return out;
  };
  const head = words(halves[0]);
  const tail = halves.length === 2 ? words(halves[1]) : [];
  if (head === null || tail === null) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const missing = 8 - head.length - tail.length;
  if (missing < 1) return null;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}

function v4Forbidden(addr: number): boolean {
  return FORBIDDEN_V4.some((c) => inCidr(addr, c));
}

function embeddedV4(w: number[], hi: number, lo: number): number {
  return ((w[hi] << 16) | w[lo]) >>> 0;
}

function v6Forbidden(w: number[]): boolean {
  const zeros = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  // ::/96 holds :: and ::1 and the deprecated IPv4-compatible form (::127.0.0.1); the embedded
  // address decides, and 0.0.0.0 and 0.0.0.1 both fall in the forbidden 0/8.
  if (zeros(0, 6)) return v4Forbidden(embeddedV4(w, 6, 7));
  // IPv4-mapped ::ffff:a.b.c.d: the kernel connects to the embedded IPv4 address.
  if (zeros(0, 5) && w[5] === 0xffff) return v4Forbidden(embeddedV4(w, 6, 7));
  // IPv4-translated ::ffff:0:a.b.c.d (RFC 2765).
  if (zeros(0, 4) && w[4] === 0xffff && w[5] === 0) return v4Forbidden(embeddedV4(w, 6, 7));
  // NAT64 well-known prefix 64:ff9b::/96 and local-use 64:ff9b:1::/48 reach the embedded IPv4 address.
  if (w[0] === 0x64 && w[1] === 0xff9b && (zeros(2, 6) || w[2] === 1)) return v4Forbidden(embeddedV4(w, 6, 7));
  // 6to4 2002:AABB:CCDD::/48 tunnels to the IPv4 address in words 1-2.
  if (w[0] === 0x2002) return v4Forbidden(embeddedV4(w, 1, 2));
  // Teredo 2001:0::/32 tunnels to an IPv4 server and client of the relay's choosing.
  if (w[0] === 0x2001 && w[1] === 0) return true;
  if (w[0] === 0x2001 && w[1] === 0xdb8) return true; // 2001:db8::/32 documentation
  if (w[0] === 0x0100 && zeros(1, 4)) return true; // 100::/64 discard-only
  if ((w[0] & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated, still routed inside some networks)
  if ((w[0] & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local, incl. AWS metadata fd00:ec2::254
  if ((w[0] & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((w[0] & 0xff00) === 0xff00) return true; // ff00::/8 multicast
  return false;
}

/** True for addresses a webhook must not reach. Anything that is not an IP address counts as forbidden: a guard fails closed. */
export function isForbiddenAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) {
    const n = parseV4(ip);
    return n === null || v4Forbidden(n);
  }
  if (family === 6) {
    const w = parseV6(ip);
    return w === null || v6Forbidden(w);
  }
  return true;
}

function isForbiddenHostname(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  return FORBIDDEN_HOSTNAMES.has(h) || h.endsWith(".localhost");
}

/** null when OK, else a reason. */
export function checkTargetUrlSyntax(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "target url is not a valid absolute URL";
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return `target url must use http: or https:, not ${u.protocol}`;
  if (u.hostname === "") return "target url must have a host";
  // Credentials in a URL end up in logs, the dashboard and the attempt history.
  if (u.username !== "" || u.password !== "") return "target url must not contain credentials (user:pass@); send them in headers";
  return null;
}

// Per URL string: a batch of 1000 jobs names a few URLs many times, and the parse was ~3.5 %
// of the API's time creating them. Long URLs are checked each time (the cache stays small).
const syntaxOf = new BoundedMap<string, string | null>(4096);
const MAX_CACHED_URL = 512;

/** checkTargetUrlSyntax, remembered per URL (it never changes for one). */
export function targetUrlSyntax(url: string): string | null {
  return url.length > MAX_CACHED_URL ? checkTargetUrlSyntax(url) : syntaxOf.getOrMake(url, checkTargetUrlSyntax);
}

function refusal(address: string): TargetRefusedError {
  return new TargetRefusedError(
    "target url points to a private address (loopback, private, link-local or reserved); set SCHEDULER_ALLOW_PRIVATE_TARGETS=1 to allow it",
    address,
  );
}

/** Addresses of a name, and how long they may be used (the smallest record TTL, when known). */
export interface Resolved {
  addresses: string[];
  ttlMs?: number;
}

async function systemLookup(host: string): Promise<Resolved> {
  const found = await dnsPromises.lookup(host, { all: true, verbatim: true });
  return { addresses: found.map((a) => a.address) };
}

let defaultResolve: (host: string) => Promise<Resolved> = systemLookup;

/**
 * Resolve target names with these DNS servers ("ip" or "ip:port") instead of the system
 * resolver; undefined goes back to the system resolver. Process-wide, set once at start-up.
 */
export function useDnsServers(servers: string[] | undefined): void {
  if (!servers || servers.length === 0) {
    defaultResolve = systemLookup;
    return;
  }
  const r = new dnsPromises.Resolver();
  r.setServers(servers);
  defaultResolve = async (host) => {
    // Either family may have no records; only both failing is a failed lookup.
    const [a, aaaa] = await Promise.allSettled([r.resolve4(host, { ttl: true }), r.resolve6(host, { ttl: true })]);
    const out = [...(a.status === "fulfilled" ? a.value : []), ...(aaaa.status === "fulfilled" ? aaaa.value : [])];
    if (out.length === 0) throw a.status === "rejected" ? a.reason : new Error(`no addresses for ${host}`);
    return { addresses: out.map((x) => x.address), ttlMs: Math.min(...out.map((x) => x.ttl)) * 1000 };
  };
}

/** The addresses a call may connect to: every one of them was checked. */
export interface CheckedTarget {
  /** The URL's host name without IPv6 brackets. */
  host: string;
  /** Empty when private targets are allowed: nothing to pin, the call resolves as it likes. */
  addresses: string[];
  ttlMs?: number;
}

/**
 * Throws TargetRefusedError for a bad URL or a forbidden address. A DNS failure throws a plain
 * Error instead: the host may resolve later, so the caller should treat it as transient.
 * Returns the checked addresses: a caller that connects must connect to one of them (a name
 * can answer differently the next time it is resolved: DNS rebinding).
 */
export async function checkTargetAddresses(url: string, opts: { allowPrivate: boolean; lookup?: (host: string) => Promise<string[]> }): Promise<CheckedTarget> {
  const syntax = checkTargetUrlSyntax(url);
  if (syntax !== null) throw new TargetRefusedError(syntax);
  const hostname = new URL(url).hostname;
  // URL keeps the brackets around IPv6 literals, but isIP does not accept them.
  const host = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  if (opts.allowPrivate) return { host, addresses: [] };

  if (isIP(host) !== 0) {
    if (isForbiddenAddress(host)) throw refusal(host);
    return { host, addresses: [host] };
  }
  if (isForbiddenHostname(host)) throw refusal(host);

  let found: Resolved;
  try {
    found = opts.lookup ? { addresses: await opts.lookup(host) } : await defaultResolve(host);
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    throw new Error(`could not resolve host ${host}: ${detail}`, { cause: err });
  }
  if (found.addresses.length === 0) throw new Error(`could not resolve host ${host}: no addresses`);
  // One forbidden address is enough: a name that points anywhere private is refused whole.
  const bad = found.addresses.find((a) => isForbiddenAddress(a));
  if (bad !== undefined) throw refusal(bad);
  return { host, addresses: found.addresses, ttlMs: found.ttlMs };
}

/** checkTargetAddresses without the addresses: for checks that make no call (creation). */
export async function assertTargetAllowed(url: string, opts: { allowPrivate: boolean; lookup?: (host: string) => Promise<string[]> }): Promise<void> {
  await checkTargetAddresses(url, opts);
}
