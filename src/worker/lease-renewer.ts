import type { Db } from "../store/db.ts";
import { renewLeases } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import { withTimeout } from "../time/with-timeout.ts";
import type { InFlight } from "./in-flight.ts";
import { ABORT_CANCEL, ABORT_LEASE } from "./abort-reasons.ts";

export interface LeaseRenewerOptions {
  db: Db;
  owner: string;
  leaseTtlMs: number;
  /** The clock-skew margin: a lease not renewed for leaseTtlMs minus this is given up. */
  marginMs: number;
  log: Logger;
  inflight: Map<string, InFlight>;
}

/**
 * Extends the leases of calls in flight, all in one statement, every third of the TTL, so a
 * long call keeps its job while a dead worker's jobs come back within one TTL. A job whose
 * lease was lost, or that a user cancelled, has its call aborted (cooperative cancel).
 *
 * A renewal that fails (throws, or hangs on a dead connection) proves nothing either way, so
 * a watchdog counts from the last extension each job's lease is known to have had: once
 * TTL − margin has passed without a new one, the lease may be gone and the reaper may hand
 * the job to another worker, so the call is aborted before that can happen.
 */
export class LeaseRenewer extends PeriodicLoop<void> {
  private watchdog: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly o: LeaseRenewerOptions) {
    super("lease-renewer", o.log);
  }

  /** How long a lease is trusted after the statement that extended it was sent. */
  private get trustMs(): number {
    return Math.max(0, this.o.leaseTtlMs - this.o.marginMs);
  }

  async runOnce(): Promise<void> {
    this.arm();
    const held = [...this.o.inflight.values()];
    if (held.length === 0) return;
    const sentAt = performance.now();
    // A renewal stuck on a dead connection must not stop the ones after it: the loop would
    // never run again, and every later call of this worker would be aborted by the watchdog.
    // A quarter of the trust period to answer, then another try soon: both fit in the time
    // the watchdog still trusts the lease.
    const rows = await withTimeout(
      Math.max(50, this.trustMs / 4),
      () =>
        renewLeases(
          this.o.db,
          this.o.owner,
          held.map((f) => ({ id: f.job.id, gen: f.gen })),
          this.o.leaseTtlMs,
        ),
      null,
    );
    this.retrySoon = rows === null;
    if (rows === null) {
      this.o.log.warn({ jobs: held.length }, "lease renewal did not answer in time; trying again at once");
      return;
    }
    const renewed = new Map(rows.map((r) => [r.id, r.cancel_requested]));
    for (const f of held) {
      if (this.o.inflight.get(f.job.id) !== f) continue; // finished meanwhile
      const cancel = renewed.get(f.job.id);
      if (cancel === undefined) {
        if (!f.abort.signal.aborted) this.o.log.warn({ job_id: f.job.id }, "lease lost while the call ran; aborting it");
        f.abort.abort(ABORT_LEASE);
        continue;
      }
      f.leaseAt = Math.max(f.leaseAt, sentAt);
      if (cancel && !f.abort.signal.aborted) {
        this.o.log.info({ job_id: f.job.id }, "cancel requested; aborting the call");
        f.abort.abort(ABORT_CANCEL);
      }
    }
    this.arm();
  }

  /** Aborts every job whose lease is no longer trusted, then waits for the next one to be. */
  private expire(): void {
    this.watchdog = undefined;
    const now = performance.now();
    for (const f of this.o.inflight.values()) {
      if (f.abort.signal.aborted || now < f.leaseAt + this.trustMs) continue;
      this.o.log.warn({ job_id: f.job.id, ms_since_renewal: Math.round(now - f.leaseAt) }, "lease not renewed in time (renewals failing); aborting the call");
      f.abort.abort(ABORT_LEASE);
    }
    this.arm();
  }

  /**
   * Sets the watchdog for the earliest lease to lapse. It also wakes at least every half
   * trust period, so a job taken since (its lease counted from its claim) is never missed.
   */
  private arm(): void {
    if (this.stopped) return;
    const now = performance.now();
    let at = now + Math.max(1, this.trustMs / 2);
    for (const f of this.o.inflight.values()) if (!f.abort.signal.aborted) at = Math.min(at, f.leaseAt + this.trustMs);
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => this.expire(), Math.max(0, at - now));
    this.watchdog.unref?.();
  }

  private stopped = false;
  /** The last renewal did not answer: the next one comes at once, not a third of a TTL later. */
  private retrySoon = false;

  override start(): void {
    this.stopped = false;
    super.start();
  }

  protected override onStop(): void {
    this.stopped = true;
    clearTimeout(this.watchdog);
    this.watchdog = undefined;
  }

  protected nextDelayMs(): number {
    if (this.retrySoon) return 50;
    return (this.o.leaseTtlMs / 3) * (0.9 + Math.random() * 0.2);
  }
}
