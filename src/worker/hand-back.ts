import { deferJobs, releaseJobs } from "../store/worker-queries.ts";
import { giveBackUncalled } from "./give-back-uncalled.ts";
import type { HostLimiter } from "./host-limiter.ts";
import type { InFlight, InFlightJobs } from "./in-flight.ts";
import type { WorkerOptions } from "./worker-options.ts";

export interface HandBackDeps {
  o: WorkerOptions;
  jobs: InFlightJobs;
  limiter: HostLimiter<InFlight>;
  stopping: () => boolean;
  /** Runs a promise the worker waits for on stop (and logs if it fails). */
  handled: (p: Promise<void>) => void;
}

/**
 * The call line's ways of handing a claimed job back to the database without calling it,
 * each with the job's release from memory: what the job's state allows decides which.
 * - returnHeld: no attempt open (cancelled, lease lost, stopping): due again at once, or
 *   cancelled when a cancel was asked (ReleaseJobs).
 * - defer: its host has no room for a while: due again after the host's wait.
 * - giveBackUncalled: the pre-call check may have opened an attempt that was never called.
 * - releaseStale: the pre-call check refused it (changed or reclaimed since the claim).
 */
export class HandBack {
  constructor(private readonly d: HandBackDeps) {}

  async returnHeld(fs: InFlight[]): Promise<void> {
    try {
      await releaseJobs(
        this.d.o.db,
        this.d.o.owner,
        fs.map((f) => ({ id: f.job.id, gen: f.gen })),
      );
    } finally {
      for (const f of fs) this.d.jobs.release(f, "given back");
    }
  }

  async defer(jobs: { f: InFlight; delayMs: number }[]): Promise<void> {
    const { o } = this.d;
    try {
      await deferJobs(
        o.db,
        o.owner,
        jobs.map(({ f, delayMs }) => ({ id: f.job.id, gen: f.gen, delayMs })),
      );
      o.log.debug({ jobs: jobs.length }, "target hosts at their limit: jobs handed back, due again shortly");
    } finally {
      for (const { f } of jobs) this.d.jobs.release(f, "deferred");
    }
  }

  /** Released from memory at once; given back in the background. */
  giveBackUncalled(fs: InFlight[]): void {
    const { o } = this.d;
    for (const f of fs) this.d.jobs.release(f, "given back");
    this.d.handled(
      giveBackUncalled(
        { db: o.db, owner: o.owner, leaseTtlMs: o.leaseTtlMs, log: o.log, stopping: this.d.stopping },
        fs.map((f) => ({ id: f.job.id, gen: f.gen })),
      ),
    );
  }

  async releaseStale(stale: InFlight[]): Promise<void> {
    const { o } = this.d;
    for (const f of stale) this.d.limiter.forget(f.job.id);
    const released = await releaseJobs(
      o.db,
      o.owner,
      stale.map((f) => ({ id: f.job.id, gen: f.gen })),
    );
    o.metrics.staleDispatches.inc(stale.length);
    for (const f of stale) {
      this.d.jobs.release(f, "stale");
      const r = released.find((x) => x.id === f.job.id);
      o.log.info({ job_id: f.job.id, status: r?.status ?? "reclaimed" }, "dispatch is stale (cancelled or changed since the claim); not calling");
    }
  }
}
