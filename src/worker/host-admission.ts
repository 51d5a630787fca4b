import { laneKey } from "./host-lane.ts";
import type { HostLimiter } from "./host-limiter.ts";
import { HeldPump } from "./held-pump.ts";
import type { HandBack } from "./hand-back.ts";
import type { InFlight, InFlightJobs } from "./in-flight.ts";
import type { WorkerOptions } from "./worker-options.ts";

export interface HostAdmissionDeps {
  o: WorkerOptions;
  jobs: InFlightJobs;
  limiter: HostLimiter<InFlight>;
  back: HandBack;
  /** The pre-call check and the calls, for jobs whose host has room. */
  begin: (fs: InFlight[]) => Promise<void>;
  stopping: () => boolean;
  /** Runs a promise the worker waits for on stop (and logs if it fails). */
  handled: (p: Promise<void>) => void;
}

/**
 * Each job's target host asked for room before its pre-call check (the limiter paces hosts):
 * it goes on, waits in memory (phase `held`, passed over by a HeldPump as the host frees), or
 * is deferred to the database until the host's wait is over.
 */
export class HostAdmission {
  private readonly held: HeldPump;

  constructor(private readonly d: HostAdmissionDeps) {
    this.held = new HeldPump(
      d.limiter,
      () => this.heldPass(),
      (p) => d.handled(p),
    );
  }

  /** A pass over the held jobs now: a call ended, a cancel came, a job was released. */
  kick(): void {
    this.held.kick(this.d.jobs.counts.held);
  }

  /** Stopping: no more timed passes (stop() gives the held jobs back). */
  disarm(): void {
    this.held.disarm();
  }

  /** Ask each job's host for room, then the pre-call check and the call. */
  async admit(fs: InFlight[]): Promise<void> {
    // Cancelled or lease lost while waiting for the instant or a slot: not called.
    const gone = fs.filter((f) => f.abort.signal.aborted);
    if (gone.length > 0) await this.d.back.returnHeld(gone);
    const claimed = fs.filter((f) => !f.abort.signal.aborted && this.d.jobs.holds(f));
    if (claimed.length === 0) return;
    try {
      const now = Date.now();
      const deferred: { f: InFlight; delayMs: number }[] = [];
      const ready: InFlight[] = [];
      for (const f of claimed) {
        const { job } = f;
        const a = this.d.limiter.admit(laneKey(job.target.url, job.tenant, job.host_limits), job.id, this.d.limiter.limitsOf(job.host_limits), f, now);
        if (a.kind === "go") {
          ready.push(f);
          continue;
        }
        this.d.o.metrics.hostDeferrals.inc();
        if (a.kind === "hold") this.d.jobs.enter(f, "held");
        else deferred.push({ f, delayMs: a.at - now });
      }
      // Neither group waits out its leases because the other's statement failed: the jobs
      // cleared to go start first, and the others are handed back whatever happened to them.
      try {
        await this.d.begin(ready);
      } finally {
        if (deferred.length > 0) await this.d.back.defer(deferred);
      }
    } catch (err) {
      // Jobs claimed but never started (nor held, armed or verifying) stay leased until the reaper returns them.
      for (const f of claimed) if (f.phase === "starting") this.d.jobs.release(f, "failed");
      throw err;
    } finally {
      this.held.arm(this.heldLeft());
    }
  }

  /**
   * A pass over the jobs held for their host (HeldPump runs one at a time): gives back the
   * cancelled, starts those whose host has room, hands back those held too long. Returns
   * how many are still held, for the pump's timer.
   */
  private async heldPass(): Promise<number> {
    if (this.d.stopping()) return 0;
    try {
      const aborted = this.d.limiter.removeHeld((f) => f.abort.signal.aborted);
      if (aborted.length > 0) await this.d.back.returnHeld(aborted);
      const { ready, overdue } = this.d.limiter.pump(Date.now());
      if (overdue.length > 0) {
        // x.at is on this process's clock (the host's pacing): handed over as a wait.
        const now = Date.now();
        await this.d.back.defer(overdue.map((x) => ({ f: x.item, delayMs: x.at - now })));
      }
      await this.d.begin(ready);
    } catch (err) {
      this.d.o.log.error(
        { err },
        "starting jobs that waited for their host failed; those not given back at once wait for their leases to lapse, then are retried",
      );
    }
    return this.heldLeft();
  }

  /** Jobs held for their host, as the pump's timer counts them (none once stopping: stop() gives them back). */
  private heldLeft(): number {
    return this.d.stopping() ? 0 : this.d.jobs.counts.held;
  }
}
