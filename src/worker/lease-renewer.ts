import type { Db } from "../store/db.ts";
import { renewLeases } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import type { InFlight } from "./worker.ts";
import { ABORT_CANCEL, ABORT_LEASE } from "./abort-reasons.ts";

export interface LeaseRenewerOptions {
  db: Db;
  owner: string;
  leaseTtlMs: number;
  log: Logger;
  inflight: Map<string, InFlight>;
}

/**
 * Extends the leases of calls in flight, all in one statement, every third of the TTL, so a
 * long call keeps its job while a dead worker's jobs come back within one TTL. A job whose
 * lease was lost, or that a user cancelled, has its call aborted (cooperative cancel).
 */
export class LeaseRenewer extends PeriodicLoop<void> {
  constructor(private readonly o: LeaseRenewerOptions) {
    super("lease-renewer", o.log);
  }

  async runOnce(): Promise<void> {
    const held = [...this.o.inflight.values()];
    if (held.length === 0) return;
    const rows = await renewLeases(this.o.db, this.o.owner, held.map((f) => ({ id: f.job.id, gen: f.gen })), this.o.leaseTtlMs);
    const renewed = new Map(rows.map((r) => [r.id, r.cancel_requested]));
    for (const f of held) {
      if (!this.o.inflight.has(f.job.id)) continue; // finished meanwhile
      const cancel = renewed.get(f.job.id);
      if (cancel === undefined) {
        this.o.log.warn({ job_id: f.job.id }, "lease lost while the call ran; aborting it");
        f.abort.abort(ABORT_LEASE);
      } else if (cancel) {
        this.o.log.info({ job_id: f.job.id }, "cancel requested; aborting the call");
        f.abort.abort(ABORT_CANCEL);
      }
    }
  }

  protected nextDelayMs(): number {
    return (this.o.leaseTtlMs / 3) * (0.9 + Math.random() * 0.2);
  }
}
