import type { Db } from "../store/db.ts";
import { type GaugeFacts, readGaugeFacts } from "../store/metrics-queries.ts";

/** Tenants named in per-tenant gauges: a bounded label set whatever the number of tenants. */
export const TOP_TENANTS = 10;
/** Due and undispatched for longer than this: overdue (seconds of lag are a busy minute, this is trouble). */
export const OVERDUE_MS = 60_000;

/** What the database-backed gauges show, read together at scrape time. */
export type GaugeSnapshot = GaugeFacts;

const EMPTY: GaugeSnapshot = {
  byStatus: new Map(),
  dueBacklog: 0,
  overdue: 0,
  oldestDueAge: 0,
  byTenant: [],
  dlq: 0,
  dlqOldestAge: 0,
  outboxLag: 0,
  byShard: new Map(),
  dueSoon: { m1: 0, m5: 0, m15: 0 },
};

/**
 * The gauges' reader: a few bounded statements (the due backlog is read once for its total,
 * tenants and shards), cached for `cacheMs` so that frequent scrapes do not become a load of
 * their own, and shared by every gauge of one scrape. The figures may lag by the cache age:
 * nothing decides on them.
 */
export function gaugeSnapshots(db: Db, o: { shards: number; cacheMs?: number }): () => Promise<GaugeSnapshot> {
  const cacheMs = o.cacheMs ?? 2000;
  let cachedAt = 0;
  let pending: Promise<GaugeSnapshot> | undefined;
  let last: GaugeSnapshot | undefined;
  const read = () => readGaugeFacts(db, { topTenants: TOP_TENANTS, overdueMs: OVERDUE_MS, shards: o.shards });
  return async () => {
    if (last && Date.now() - cachedAt < cacheMs) return last;
    pending ??= read()
      .then(
        (s) => {
          last = s;
          cachedAt = Date.now();
          return s;
        },
        // The database is away: keep serving the last figures (and the process's own metrics)
        // rather than failing the whole scrape; /readyz reports the outage.
        () => last ?? EMPTY,
      )
      .finally(() => (pending = undefined));
    return pending;
  };
}
