import type { HostLimits } from "../store/types.ts";
import { BoundedMap } from "../bounded-map.ts";

// What a call's host limits are keyed by (see HostLimiter): the host of its URL, and the lane
// of its tenant when its own host_limits set a rate or a concurrency.

/** A limit that is set: a positive number, else undefined. */
export function positive(n: number | null | undefined): number | undefined {
  return typeof n === "number" && n > 0 ? n : undefined;
}

/**
 * The lane a job's calls are limited in: its host, or, when its host_limits set a rate or a
 * concurrency, its tenant's own lane to that host (so one tenant's limits never pace
 * another's calls). '#' cannot appear in a URL's host.
 */
export function laneKey(url: string, tenant: string, own: HostLimits | null | undefined): string {
  const host = hostKey(url);
  return positive(own?.rate) !== undefined || positive(own?.concurrency) !== undefined ? `${host}#${tenant}` : host;
}

// A job's URL is parsed for its host on every admission; the URLs in use are few.
const hostOfUrl = new BoundedMap<string, string>(10_000);

/** The key hosts are limited by: host[:port] as in the URL (the port only when not the scheme's default). */
export function hostKey(url: string): string {
  return hostOfUrl.getOrMake(url, parseHost);
}

function parseHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}
