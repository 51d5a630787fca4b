import type { Db } from "../store/db.ts";
import { sql } from "../store/sql.ts";

/** Tenants named in per-tenant gauges: a bounded label set whatever the number of tenants. */
export const TOP_TENANTS = 10;
/** Due and undispatched for longer than this: overdue (seconds of lag are a busy minute, this is trouble). */
export const OVERDUE_MS = 60_000;

/** What the database-backed gauges show, read together at scrape time. */
export interface GaugeSnapshot {
  byStatus: Map<string, number>;
  dueBacklog: number;
  overdue: number;
  oldestDueAge: number;
  byTenant: { tenant: string; n: number }[];
  dlq: number;
  dlqOldestAge: number;
  outboxLag: number;
  byShard: Map<number, { n: number; oldest: number }>;
  dueSoon: { m1: number; m5: number; m15: number };
}

const EMPTY: GaugeSnapshot = {
  byStatus: new Map(), dueBacklog: 0, overdue: 0, oldestDueAge: 0, byTenant: [], dlq: 0, dlqOldestAge: 0, outboxLag: 0,
  byShard: new Map(), dueSoon: { m1: 0, m5: 0, m15: 0 },
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
  const read = async (): Promise<GaugeSnapshot> => {
    // One after another: a scrape must not take several of the pool's connections from
    // the claims that share it.
    const statusRows = await db.query<{ status: string; n: string }>(sql("CountJobsByStatus"));
    const backlogRows = await db.query<{ kind: string; key: string | null; n: string; overdue: string | null; oldest_age_s: number | null }>(sql("DueBacklogBreakdown"), [TOP_TENANTS, OVERDUE_MS, o.shards]);
    const [lag] = await db.query<{ lag: number | string }>(sql("OutboxLag"));
    const [dlqOldest] = await db.query<{ age_s: number | string | null }>(sql("DlqOldest"));
    const [soon] = await db.query<{ m1: string; m5: string; m15: string }>(sql("DueSoon"));
    const byStatus = new Map(statusRows.map((r) => [r.status, Number(r.n)]));
    const total = backlogRows.find((r) => r.kind === "total");
    return {
      byStatus,
      dueBacklog: Number(total?.n ?? 0),
      overdue: Number(total?.overdue ?? 0),
      oldestDueAge: Math.max(0, Number(total?.oldest_age_s ?? 0)),
      byTenant: backlogRows.filter((r) => r.kind === "tenant").map((r) => ({ tenant: r.key!, n: Number(r.n) })),
      byShard: new Map(backlogRows.filter((r) => r.kind === "shard").map((r) => [Number(r.key), { n: Number(r.n), oldest: Math.max(0, Number(r.oldest_age_s ?? 0)) }])),
      dlq: byStatus.get("dead") ?? 0,
      dlqOldestAge: Math.max(0, Number(dlqOldest?.age_s ?? 0)),
      outboxLag: Math.max(0, Number(lag?.lag ?? 0)),
      dueSoon: { m1: Number(soon?.m1 ?? 0), m5: Number(soon?.m5 ?? 0), m15: Number(soon?.m15 ?? 0) },
    };
  };
  return async () => {
    if (last && Date.now() - cachedAt < cacheMs) return last;
    pending ??= read().then(
      (s) => {
        last = s;
        cachedAt = Date.now();
        return s;
      },
      // The database is away: keep serving the last figures (and the process's own metrics)
      // rather than failing the whole scrape; /readyz reports the outage.
      () => last ?? EMPTY,
    ).finally(() => (pending = undefined));
    return pending;
  };
}
