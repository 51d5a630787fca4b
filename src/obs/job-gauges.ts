import client from "prom-client";
import type { Db } from "../store/db.ts";
import { sql } from "../store/sql.ts";
import { JOB_STATUSES } from "../store/types.ts";
import type { Metrics } from "./metrics.ts";

/**
 * Gauges read from the database when scraped, cached briefly so that frequent scrapes do not
 * become a load of their own. They may lag by the cache age: nothing decides on them.
 */
/** Tenants named in per-tenant gauges: a bounded label set whatever the number of tenants. */
const TOP_TENANTS = 10;
/** Due and undispatched for longer than this: overdue (seconds of lag are a busy minute, this is trouble). */
export const OVERDUE_MS = 60_000;

export function registerJobGauges(metrics: Metrics, db: Db, cacheMs = 2000): void {
  let cachedAt = 0;
  let pending: Promise<Snapshot> | undefined;
  let last: Snapshot | undefined;
  interface Snapshot { byStatus: Map<string, number>; dueBacklog: number; overdue: number; oldestDueAge: number; dlq: number; dlqOldestAge: number; outboxLag: number; byTenant: { tenant: string; n: number }[]; tenantTotal: number }
  const snapshot = async (): Promise<Snapshot> => {
    if (last && Date.now() - cachedAt < cacheMs) return last;
    pending ??= (async () => {
      try {
        const rows = await db.query<{ status: string; n: string }>(sql("CountJobsByStatus"));
        const due = (await db.query<{ n: string; overdue: string; oldest_age_s: string | null }>(sql("DueBacklog"), [OVERDUE_MS]))[0];
        const lag = (await db.query<{ lag: number | string }>(sql("OutboxLag")))[0];
        const dlqOldest = (await db.query<{ age_s: number | string }>(sql("DlqOldest")))[0];
        const tenantRows = await db.query<{ tenant: string; n: string; total: string }>(sql("DueBacklogByTenant"), [TOP_TENANTS]);
        const byTenant = tenantRows.map((r) => ({ tenant: r.tenant, n: Number(r.n) }));
        const tenantTotal = Number(tenantRows[0]?.total ?? 0);
        const byStatus = new Map(rows.map((r) => [r.status, Number(r.n)]));
        last = {
          byStatus, dueBacklog: Number(due?.n ?? 0), overdue: Number(due?.overdue ?? 0),
          dlqOldestAge: Math.max(0, Number(dlqOldest?.age_s ?? 0)), oldestDueAge: Math.max(0, Number(due?.oldest_age_s ?? 0)), dlq: byStatus.get("dead") ?? 0,
          outboxLag: Math.max(0, Number(lag?.lag ?? 0)),
          byTenant,
          tenantTotal,
        };
        cachedAt = Date.now();
        return last;
      } catch {
        // The database is away: keep serving the last figures (and the process's own
        // metrics) rather than failing the whole scrape; /readyz reports the outage.
        return last ?? { byStatus: new Map(), dueBacklog: 0, overdue: 0, oldestDueAge: 0, dlq: 0, dlqOldestAge: 0, outboxLag: 0, byTenant: [], tenantTotal: 0 };
      } finally {
        pending = undefined;
      }
    })();
    return pending;
  };
  const registers = [metrics.registry];
  new client.Gauge({
    name: "scheduler_jobs", help: "Jobs by status", labelNames: ["status"], registers,
    async collect() {
      const s = await snapshot();
      for (const st of JOB_STATUSES) this.set({ status: st }, s.byStatus.get(st) ?? 0);
    },
  });
  new client.Gauge({ name: "scheduler_due_backlog", help: "Jobs due but not yet dispatched", registers, async collect() { this.set((await snapshot()).dueBacklog); } });
  new client.Gauge({ name: "scheduler_oldest_due_age_seconds", help: "Age of the oldest due, undispatched job", registers, async collect() { this.set((await snapshot()).oldestDueAge); } });
  new client.Gauge({ name: "scheduler_queue_depth", help: "Jobs dispatched, not yet taken by a worker", registers, async collect() { this.set((await snapshot()).byStatus.get("queued") ?? 0); } });
  new client.Gauge({
    name: "scheduler_tenant_due_backlog",
    help: `Due, undispatched jobs of the ${TOP_TENANTS} tenants with the most; the rest together as tenant="other"`,
    labelNames: ["tenant"],
    registers,
    async collect() {
      const s = await snapshot();
      this.reset();
      let top = 0;
      for (const { tenant, n } of s.byTenant) {
        this.set({ tenant }, n);
        top += n;
      }
      // From the same statement as the top ones: "other" is exact, not a race between counts.
      this.set({ tenant: "other" }, Math.max(0, s.tenantTotal - top));
    },
  });
  new client.Gauge({
    name: "scheduler_index_outbox_lag_seconds", help: "Age of the oldest index change not yet relayed to the Redis due index (0: none pending)", registers,
    async collect() { this.set((await snapshot()).outboxLag); },
  });
  new client.Gauge({ name: "scheduler_dlq_jobs", help: "Dead jobs", registers, async collect() { this.set((await snapshot()).dlq); } });
  new client.Gauge({ name: "scheduler_dlq_oldest_age_seconds", help: "How long ago the oldest dead job died (0: none)", registers, async collect() { this.set((await snapshot()).dlqOldestAge); } });
  new client.Gauge({ name: "scheduler_overdue_jobs", help: `Jobs due more than ${OVERDUE_MS / 1000} s ago and not yet dispatched`, registers, async collect() { this.set((await snapshot()).overdue); } });
}
