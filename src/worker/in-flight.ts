import type { Logger } from "../obs/log.ts";
import type { ClaimedJob } from "../store/types.ts";
import { JobAbort } from "./job-abort.ts";

/** Where a claimed job is in its worker: the state diagram heads src/worker/worker.ts. */
export type Phase = "claimed" | "gated" | "ready" | "held" | "verifying" | "starting" | "armed" | "calling" | "finishing";

export interface InFlight {
  job: ClaimedJob;
  gen: number;
  abort: JobAbort;
  /** performance.now() just before the last statement that extended the lease was sent. */
  leaseAt: number;
  /** Set only by InFlightJobs (it keeps the count of each phase). */
  phase: Phase;
}

/** Why a job left the worker (for the debug log of release). */
export type ReleaseWhy = "recorded" | "given back" | "deferred" | "stale" | "verified" | "failed";

/**
 * A worker's claimed jobs, the one owner of their per-job state: each is here, in exactly one
 * phase, from its claim until release() takes it out. Counts per phase (and of the jobs below
 * the reserved class that hold a slot) are kept as phases change, so the worker's room is
 * read without walking the jobs.
 */
export class InFlightJobs {
  /** By job id. The lease renewer walks it; only this class changes it. */
  readonly map = new Map<string, InFlight>();
  readonly counts: Readonly<Record<Phase, number>> = {
    claimed: 0,
    gated: 0,
    ready: 0,
    held: 0,
    verifying: 0,
    starting: 0,
    armed: 0,
    calling: 0,
    finishing: 0,
  };
  private below = 0;

  constructor(
    private readonly o: {
      /** Gives a job's host room back (HostLimiter.forget; nothing if it had none). */
      forget: (id: string) => void;
      /** Jobs below this priority may fill only the slots not reserved (SCHEDULER_RESERVED_SLOTS). */
      reservedMin?: number;
      log: Logger;
    },
  ) {}

  get size(): number {
    return this.map.size;
  }

  get(id: string): InFlight | undefined {
    return this.map.get(id);
  }

  values(): IterableIterator<InFlight> {
    return this.map.values();
  }

  /** Jobs below the reserved class that hold a slot (all but those held for their host). */
  busyBelow(): number {
    return this.below;
  }

  /**
   * A claimed job, in phase `claimed`. `leaseAt`: when the claim that took its lease was sent.
   * One already here for the same job (a claim after its lease lapsed) counts no more.
   */
  add(job: ClaimedJob, leaseAt: number): InFlight {
    const was = this.map.get(job.id);
    if (was) this.count(was, -1);
    const f: InFlight = { job, gen: job.lease_generation, abort: new JobAbort(), leaseAt, phase: "claimed" };
    this.map.set(job.id, f);
    this.count(f, 1);
    return f;
  }

  /** Whether `f` is still this worker's (not released, nor replaced by a later claim of its job). */
  holds(f: InFlight): boolean {
    return this.map.get(f.job.id) === f;
  }

  /** Moves a job to another phase: the one place a phase changes. */
  enter(f: InFlight, phase: Phase): void {
    if (this.holds(f)) {
      this.count(f, -1);
      f.phase = phase;
      this.count(f, 1);
    } else f.phase = phase;
  }

  /**
   * The one exit: the job leaves the worker (its outcome written, or handed back to the
   * database, or left to its lease), and its host's room is given back if it still had some.
   */
  release(f: InFlight, why: ReleaseWhy): void {
    if (!this.holds(f)) return;
    this.map.delete(f.job.id);
    this.count(f, -1);
    this.o.forget(f.job.id);
    if (why !== "recorded") this.o.log.debug({ job_id: f.job.id, phase: f.phase, why }, "released without a recorded call");
  }

  private count(f: InFlight, by: 1 | -1): void {
    (this.counts as Record<Phase, number>)[f.phase] += by;
    if (f.phase !== "held" && this.o.reservedMin !== undefined && f.job.priority < this.o.reservedMin) this.below += by;
  }
}
