import type { Queryable } from "./db.ts";
import { outboxLag } from "./index-queries.ts";
import { sql } from "./sql.ts";

/** What the database-backed gauges show, read together (see obs/gauge-snapshot.ts). */
export interface GaugeFacts {
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

/**
 * The gauges' statements, one after another: a scrape must not take several of the pool's
 * connections from the claims that share it. `topTenants`: tenants named in per-tenant
 * figures; `overdueMs`: due and undispatched for longer than this is overdue.
 */
export async function readGaugeFacts(db: Queryable, o: { topTenants: number; overdueMs: number; shards: number }): Promise<GaugeFacts> {
  const statusRows = await db.query<{ status: string; n: string }>(sql("CountJobsByStatus"));
  const backlogRows = await db.query<{ kind: string; key: string | null; n: string; overdue: string | null; oldest_age_s: number | null }>(
    sql("DueBacklogBreakdown"),
    [o.topTenants, o.overdueMs, o.shards],
  );
  const lag = await outboxLag(db);
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
    byShard: new Map(
      backlogRows.filter((r) => r.kind === "shard").map((r) => [Number(r.key), { n: Number(r.n), oldest: Math.max(0, Number(r.oldest_age_s ?? 0)) }]),
    ),
    dlq: byStatus.get("dead") ?? 0,
    dlqOldestAge: Math.max(0, Number(dlqOldest?.age_s ?? 0)),
    outboxLag: Math.max(0, lag),
    dueSoon: { m1: Number(soon?.m1 ?? 0), m5: Number(soon?.m5 ?? 0), m15: Number(soon?.m15 ?? 0) },
  };
}

/** The tenants with the largest due backlog, largest first, at most `limit`. */
export async function dueBacklogByTenant(db: Queryable, limit: number): Promise<{ tenant: string; n: number }[]> {
  const rows = await db.query<{ tenant: string; n: string }>(sql("DueBacklogByTenant"), [limit]);
  return rows.map((r) => ({ tenant: r.tenant, n: Number(r.n) }));
}
