import type { Db } from "../store/db.ts";
import { readStats } from "../store/stats.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import type { Logger } from "./log.ts";
import { OVERDUE_MS } from "./gauge-snapshot.ts";

export interface StatsSample {
  at: string;
  due_backlog: number;
  queue_depth: number;
  running: number;
  dead: number;
  /** Attempts finished since the previous sample, by outcome. */
  finished: Record<string, number>;
}

/**
 * Backlog, queue depth and throughput over the last hour, for the dashboard's charts: an api
 * process samples the database every interval and keeps a bounded ring in memory (lost on
 * restart; the metrics in Prometheus are the durable history).
 */
export class StatsHistory extends PeriodicLoop<void> {
  private readonly ring: StatsSample[] = [];

  constructor(private readonly o: { db: Db; log: Logger; intervalMs: number; keep: number }) {
    super("stats-history", o.log);
  }

  samples(): StatsSample[] {
    return [...this.ring];
  }

  async runOnce(): Promise<void> {
    const s = await readStats(this.o.db, { tenant: null, overdueMs: OVERDUE_MS, windowS: this.o.intervalMs / 1000 });
    this.ring.push({
      at: new Date().toISOString(),
      due_backlog: s.due_backlog,
      queue_depth: s.queue_depth,
      running: s.jobs.running ?? 0,
      dead: s.jobs.dead ?? 0,
      finished: s.recent.by_outcome,
    });
    if (this.ring.length > this.o.keep) this.ring.splice(0, this.ring.length - this.o.keep);
  }

  protected nextDelayMs(): number {
    return this.o.intervalMs;
  }
}
