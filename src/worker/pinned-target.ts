import { isIP } from "node:net";
import { BoundedMap } from "../bounded-map.ts";
import { checkTargetAddresses, TargetRefusedError, targetUrlSyntax } from "./target-guard.ts";

/**
 * How to call a target so that the connection goes to an address that was checked: the URL
 * with the host replaced by that address, the original Host header, and for https the
 * original name as TLS server name (SNI, and the name the certificate is checked against).
 */
export interface PinnedCall {
  url: string;
  /** Absent when nothing is pinned (an IP literal, or private targets allowed). */
  host?: string;
  tls?: { serverName: string };
}

// Checked addresses per host for a while: a DNS lookup per call would cost more than the
// call. Caching stays correct because the call connects to the cached, checked address.
const MAX_TTL_MS = 30_000;
const MIN_TTL_MS = 1_000;
const MAX_CACHED = 10_000;
const pins = new BoundedMap<string, { until: number; address?: string; refused?: TargetRefusedError }>(MAX_CACHED);
// The same per URL, as the call is made (the pin's lifetime): a burst calls a few URLs many
// times, and parsing and rewriting each call's URL was ~2 % of the worker's time.
const calls = new BoundedMap<string, { until: number; call?: PinnedCall; refused?: TargetRefusedError }>(MAX_CACHED);

/**
 * The call's URL and pinning for a target; throws (or rejects) as checkTargetAddresses does.
 * Known already (private targets allowed, or a pin still fresh): the answer itself, not a
 * promise, so the common call makes no promise and awaits nothing here (see deliver).
 */
export function pinTarget(url: string, allowPrivate: boolean): PinnedCall | Promise<PinnedCall> {
  if (allowPrivate) {
    // Nothing to resolve or pin: the syntax check only (it never changes for a URL).
    const syntax = targetUrlSyntax(url);
    if (syntax !== null) throw new TargetRefusedError(syntax);
    return { url };
  }
  const known = calls.get(url);
  if (known && known.until > Date.now()) {
    if (known.refused) throw known.refused;
    return known.call!;
  }
  return lookUpPin(url, allowPrivate);
}

async function lookUpPin(url: string, allowPrivate: boolean): Promise<PinnedCall> {
  const now = Date.now();
  const u = new URL(url);
  let pin = pins.get(u.hostname);
  if (!pin || pin.until <= now) {
    try {
      const checked = await checkTargetAddresses(url, { allowPrivate });
      const ttl = Math.min(MAX_TTL_MS, Math.max(MIN_TTL_MS, checked.ttlMs ?? MAX_TTL_MS));
      // IPv4 first: a host with no IPv6 route would otherwise fail calls that used to work.
      const address = checked.addresses.find((a) => isIP(a) === 4) ?? checked.addresses[0];
      pin = { until: now + ttl, address };
    } catch (err) {
      if (!(err instanceof TargetRefusedError)) throw err;
      pin = { until: now + MAX_TTL_MS, refused: err };
    }
    pins.set(u.hostname, pin);
  }
  if (pin.refused) {
    calls.set(url, { until: pin.until, refused: pin.refused });
    throw pin.refused;
  }
  const call = pinnedCall(u, pin.address!);
  calls.set(url, { until: pin.until, call });
  return call;
}

/** The call to `u` connecting to `address` (already checked). Exported for the TLS test. */
export function pinnedCall(u: URL, address: string): PinnedCall {
  const bare = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  if (bare === address) return { url: u.href };
  const to = new URL(u.href);
  to.hostname = isIP(address) === 6 ? `[${address}]` : address;
  return { url: to.href, host: u.host, ...(u.protocol === "https:" ? { tls: { serverName: bare } } : {}) };
}

/** Error text about the pinned URL, told in terms of the URL the job names. */
export function unpinMessage(message: string, original: string, call: PinnedCall): string {
  if (!call.host) return message;
  return message.split(new URL(call.url).origin).join(new URL(original).origin);
}
