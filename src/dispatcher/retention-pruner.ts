import type { Config } from "../config.ts";
import type { Db } from "../store/db.ts";
import { type PrunableStatus, pruneAudit, pruneFinishedJobs, prunePayloads } from "../store/retention.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";

export interface RetentionPrunerOptions {
  db: Db;
  retention: Config["retention"];
  log: Logger;
  metrics: Metrics;
  /** Only the dispatch leader prunes: one pruner at a time, in the home region. */
  isLeader: () => boolean;
}

export interface PruneResult {
  /** Rows deleted this pass, by kind (job status, payload, audit). */
  pruned: Record<string, number>;
  /** Some kind filled its batch: more is waiting, so the next pass comes soon. */
  more: boolean;
}

/** Pause between passes while a backlog drains: bounded batches, but other work gets the database in between. */
const BACKLOG_PAUSE_MS = 50;

/**
 * Deletes finished jobs (and their attempts) once their status's retention has passed, then
 * payloads no job or schedule references, and old audit entries when that is asked for. Each
 * statement deletes at most `batch` rows; a backlog drains over several passes.
 */
export class RetentionPruner extends PeriodicLoop<PruneResult> {
  constructor(private readonly o: RetentionPrunerOptions) {
    super("retention-pruner", o.log);
  }

  async runOnce(): Promise<PruneResult> {
    const out: PruneResult = { pruned: {}, more: false };
    if (!this.o.isLeader()) return out;
    const r = this.o.retention;
    const note = (kind: string, n: number, full: boolean) => {
      if (n > 0) {
        out.pruned[kind] = n;
        this.o.metrics.pruned.inc({ kind }, n);
      }
      if (full) out.more = true;
    };
    const periods: [PrunableStatus, number | null][] = [
      ["succeeded", r.succeededMs],
      ["cancelled", r.cancelledMs],
      ["expired", r.expiredMs],
      ["dead", r.deadMs],
    ];
    for (const [status, ms] of periods) {
      if (ms === null) continue;
      const n = await pruneFinishedJobs(this.o.db, status, ms, r.batch);
      note(status, n, n >= r.batch);
    }
    // After the jobs: a payload whose last job just went is unreferenced now (its grace still applies).
    const p = await prunePayloads(this.o.db, r.payloadGraceMs, r.batch);
    note("payload", p.pruned, p.seen >= r.batch);
    if (r.auditMs !== null) {
      const n = await pruneAudit(this.o.db, r.auditMs, r.batch);
      note("audit", n, n >= r.batch);
    }
    if (Object.keys(out.pruned).length > 0) this.o.log.info({ pruned: out.pruned, more: out.more }, "retention: pruned");
    return out;
  }

  protected nextDelayMs(last: PruneResult | undefined): number {
    return last?.more ? BACKLOG_PAUSE_MS : this.o.retention.intervalMs * (0.8 + Math.random() * 0.4);
  }
}
