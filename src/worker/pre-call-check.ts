import { startAttempts } from "../store/worker-queries.ts";
import type { HandBack } from "./hand-back.ts";
import type { InFlight, InFlightJobs } from "./in-flight.ts";
import type { SlotSizing } from "./slot-sizing.ts";
import type { RetryVerifier } from "./verify-before-retry.ts";
import type { WorkerOptions } from "./worker-options.ts";

export interface PreCallCheckDeps {
  o: WorkerOptions;
  jobs: InFlightJobs;
  sizing: SlotSizing;
  verifier: RetryVerifier;
  back: HandBack;
  /** Checked (attempt opened): in line for the next free call slot. */
  arm: (f: InFlight, attemptId: string, number: number, catchup: boolean) => void;
  /** Calls armed jobs while call slots are free. */
  launchArmed: () => void;
}

/**
 * The pre-call check in the database for a batch of jobs (StartAttempts: still ours, not
 * cancelled or changed, an attempt opened), after verify-before-retry took those whose last
 * call may have been delivered; what passes is armed for the call slots, what does not goes
 * back.
 */
export class PreCallCheck {
  constructor(private readonly d: PreCallCheckDeps) {}

  /** The pre-call check for jobs whose host slot is reserved, then one call per job that passes it. */
  async run(fs: InFlight[]): Promise<void> {
    for (const f of fs) this.d.jobs.enter(f, "starting");
    // Verify before retry: a job whose last call may have been delivered asks its target first.
    const ready = this.d.verifier.divert(fs);
    if (ready.length < fs.length) {
      const go = new Set(ready);
      for (const f of fs) if (!go.has(f)) this.d.jobs.enter(f, "verifying");
    }
    if (ready.length === 0) return;
    let started: Awaited<ReturnType<typeof startAttempts>>;
    const sentAt = performance.now();
    try {
      started = await startAttempts(
        this.d.o.db,
        this.d.o.owner,
        this.d.o.region,
        ready.map((f) => ({ id: f.job.id, gen: f.gen, version: f.job.version })),
        {
          ttlMs: this.d.o.leaseTtlMs,
          marginMs: this.d.o.leaseMarginMs,
        },
      );
      const ms = performance.now() - sentAt;
      this.d.sizing.checked(ms);
      await this.d.o.afterStartAttempts?.(started.map((s) => s.job_id));
    } catch (err) {
      // No answer: the check may have committed and opened attempts, or not. Nothing is
      // called (its outcome could not be recorded against an attempt we do not know), and
      // everything is given back at once, not left for the reaper, which would count an
      // opened attempt as a lost call: a max_attempts 1 job would die uncalled.
      this.d.back.giveBackUncalled(ready);
      throw err;
    }
    // Opened attempts are called (or armed for the next free slot) before anything else can fail.
    for (const s of started) {
      const f = this.d.jobs.get(s.job_id);
      if (!f) continue;
      // The check extended the lease: the watchdog counts from it.
      f.leaseAt = Math.max(f.leaseAt, sentAt);
      this.d.arm(f, s.attempt_id, s.number, s.catchup);
    }
    this.d.launchArmed();
    try {
      const startedIds = new Set(started.map((s) => s.job_id));
      // Cancelled, rescheduled, reclaimed or its lease lapsed since the claim: not called.
      const stale = ready.filter((f) => !startedIds.has(f.job.id));
      if (stale.length > 0) await this.d.back.releaseStale(stale);
    } catch (err) {
      for (const f of ready) if (f.phase === "starting") this.d.jobs.release(f, "failed");
      throw err;
    }
  }
}
