import type { Db } from "../store/db.ts";
import { reapExpiredLeases } from "../store/dispatch-queries.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import { endTimedOutAsync } from "../worker/async-finish.ts";

export interface LeaseReaperOptions {
  db: Db;
  batch: number;
  intervalMs: number;
  skewMs: number;
  log: Logger;
  metrics: Metrics;
  /** Only the dispatch leader reaps. */
  isLeader: () => boolean;
  onReaped?: (n: number) => void;
}

/**
 * Queued or running jobs whose lease passed go back to scheduled (their worker is gone, or an
 * async job's target stopped heartbeating). Async attempts past their execution ceiling end
 * first, as timed out, whether or not they still heartbeat.
 */
export class LeaseReaper extends PeriodicLoop<number> {
  constructor(private readonly o: LeaseReaperOptions) {
    super("lease-reaper", o.log);
  }

  async runOnce(): Promise<number> {
    if (!this.o.isLeader()) return 0;
    const timedOut = await endTimedOutAsync(this.o.db, this.o.batch, this.o.log, this.o.metrics);
    const rows = await reapExpiredLeases(this.o.db, { limit: this.o.batch, skewMs: this.o.skewMs });
    for (const r of rows) {
      this.o.metrics.leaseExpiries.inc({ state: r.was });
      if (r.in_call) this.o.metrics.duplicateAttempts.inc();
      if (r.now_status === "dead") this.o.metrics.dlqIngress.inc();
      this.o.log.warn({ job_id: r.id, was: r.was, status: r.now_status }, "lease expired; job recovered");
    }
    if (rows.length + timedOut > 0) this.o.onReaped?.(rows.length + timedOut);
    return Math.max(rows.length, timedOut);
  }

  protected nextDelayMs(last: number | undefined): number {
    return last === this.o.batch ? 0 : this.o.intervalMs * (0.8 + Math.random() * 0.4);
  }
}
