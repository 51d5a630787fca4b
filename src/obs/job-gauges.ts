import client from "prom-client";
import { JOB_STATUSES } from "../store/types.ts";
import { type GaugeSnapshot, OVERDUE_MS, TOP_TENANTS } from "./gauge-snapshot.ts";
import type { Metrics } from "./metrics.ts";

/** The gauges about jobs, from the database at scrape time (see gauge-snapshot.ts). */
export function registerJobGauges(metrics: Metrics, snapshot: () => Promise<GaugeSnapshot>): void {
  const registers = [metrics.registry];
  new client.Gauge({
    name: "scheduler_jobs",
    help: "Jobs by status",
    labelNames: ["status"],
    registers,
    async collect() {
      const s = await snapshot();
      for (const st of JOB_STATUSES) this.set({ status: st }, s.byStatus.get(st) ?? 0);
    },
  });
  new client.Gauge({
    name: "scheduler_due_backlog",
    help: "Jobs due but not yet dispatched",
    registers,
    async collect() {
      this.set((await snapshot()).dueBacklog);
    },
  });
  new client.Gauge({
    name: "scheduler_oldest_due_age_seconds",
    help: "Age of the oldest due, undispatched job",
    registers,
    async collect() {
      this.set((await snapshot()).oldestDueAge);
    },
  });
  new client.Gauge({
    name: "scheduler_queue_depth",
    help: "Jobs dispatched, not yet taken by a worker",
    registers,
    async collect() {
      this.set((await snapshot()).byStatus.get("queued") ?? 0);
    },
  });
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
      this.set({ tenant: "other" }, Math.max(0, s.dueBacklog - top));
    },
  });
  new client.Gauge({
    name: "scheduler_index_outbox_lag_seconds",
    help: "Age of the oldest index change not yet relayed to the Redis due index (0: none pending)",
    registers,
    async collect() {
      this.set((await snapshot()).outboxLag);
    },
  });
  new client.Gauge({
    name: "scheduler_dlq_jobs",
    help: "Dead jobs",
    registers,
    async collect() {
      this.set((await snapshot()).dlq);
    },
  });
  new client.Gauge({
    name: "scheduler_dlq_oldest_age_seconds",
    help: "How long ago the oldest dead job died (0: none)",
    registers,
    async collect() {
      this.set((await snapshot()).dlqOldestAge);
    },
  });
  new client.Gauge({
    name: "scheduler_overdue_jobs",
    help: `Jobs due more than ${OVERDUE_MS / 1000} s ago and not yet dispatched`,
    registers,
    async collect() {
      this.set((await snapshot()).overdue);
    },
  });
}
