import type { ClaimRow } from "../store/types.ts";
import { unstartAtClaim } from "../store/worker-queries.ts";
import type { DbClock } from "../time/db-clock.ts";
import type { CallLine } from "./call-line.ts";
import type { DueGate } from "./due-gate.ts";
import { laneKey } from "./host-lane.ts";
import type { HostLimiter } from "./host-limiter.ts";
import type { InFlight, InFlightJobs } from "./in-flight.ts";
import type { WorkerOptions } from "./worker-options.ts";

export interface ClaimIntakeDeps {
  o: WorkerOptions;
  jobs: InFlightJobs;
  clock: DbClock;
  /** Claimed jobs not due yet wait here for their instant. */
  gate: DueGate<InFlight>;
  limiter: HostLimiter<InFlight>;
  /** Where due jobs go in line for a call slot, and started ones are armed. */
  line: CallLine;
}

/**
 * The worker's first half (the state diagram is in worker.ts): a batch just claimed, its
 * leases in InFlightJobs, sorted by what each job needs next. Not due yet: gated until its
 * instant. Due: in line for a call slot (CallLine). Started by its claim (the claim was its
 * pre-call check): armed at once, or its attempt taken back when its host has no room.
 */
export class ClaimIntake {
  constructor(private readonly d: ClaimIntakeDeps) {}

  /**
   * A batch just claimed, on its way to its calls: not due yet → gated; due → in line for a
   * call slot (CallLine, which asks each job's host, then checks and calls it); started by
   * its claim → armed, or back to the line if its host has no room now.
   */
  async take(claimed: ClaimRow[]): Promise<void> {
    try {
      await this.d.o.beforeStart?.(claimed);
    } catch (err) {
      for (const job of claimed) {
        const f = this.d.jobs.get(job.id);
        if (f) this.d.jobs.release(f, "failed");
      }
      throw err;
    }
    const now = this.d.clock.now();
    const open: InFlight[] = [];
    const startedAtClaim: ClaimRow[] = [];
    for (const job of claimed) {
      if (job.attempt_id !== null) {
        startedAtClaim.push(job);
        continue;
      }
      const f = this.d.jobs.get(job.id);
      if (!f) continue;
      if (job.due_at.getTime() >= now) {
        this.d.jobs.enter(f, "gated");
        this.d.gate.hold(job.id, job.due_at, f);
      } else open.push(f);
    }
    const unstarted = startedAtClaim.length > 0 ? this.armStarted(startedAtClaim) : [];
    if (unstarted.length > 0) open.push(...(await this.unstart(unstarted)));
    await this.d.line.opened(open);
  }

  /**
   * Jobs whose claim was their pre-call check (attempt opened, see ClaimDueIds): armed for
   * their call slots at once. One whose lease may have lapsed since the claim was sent (a
   * stall: GC, SIGSTOP) is given back uncalled, its attempt deleted as if never opened.
   * Returns those whose host the limiter does not clear now (paused by a Retry-After, or at
   * a limit): their attempts are to be taken back (unstart), the jobs kept.
   */
  private armStarted(jobs: ClaimRow[]): ClaimRow[] {
    const now = Date.now();
    const back: InFlight[] = [];
    const notNow: ClaimRow[] = [];
    for (const job of jobs) {
      const f = this.d.jobs.get(job.id);
      if (!f) continue;
      if (f.abort.signal.aborted || performance.now() - f.leaseAt > this.d.o.leaseTtlMs - this.d.o.leaseMarginMs) {
        back.push(f);
        continue;
      }
      const a = this.d.limiter.admit(laneKey(job.target.url, job.tenant, job.host_limits), job.id, this.d.limiter.limitsOf(job.host_limits), f, now);
      if (a.kind === "go") this.d.line.arm(f, job.attempt_id!, job.calls, job.catchup);
      else {
        // Asked again on the ordinary path once the attempt is taken back.
        this.d.limiter.forget(job.id);
        notNow.push(job);
      }
    }
    this.d.line.launchArmed();
    if (back.length > 0) this.d.line.giveBackUncalled(back);
    return notNow;
  }

  /**
   * Takes back the attempts a claim opened for jobs that cannot be called now; the jobs stay
   * claimed and take the ordinary path (wait in memory, or deferred; checked by
   * StartAttempts). Returns them; if the statement fails, they are given back uncalled instead.
   */
  private async unstart(jobs: ClaimRow[]): Promise<InFlight[]> {
    const fs = jobs.flatMap((j) => this.d.jobs.get(j.id) ?? []);
    try {
      await unstartAtClaim(
        this.d.o.db,
        this.d.o.owner,
        jobs.map((j) => ({ id: j.id, gen: j.lease_generation, attemptId: j.attempt_id! })),
      );
    } catch (err) {
      this.d.o.log.warn({ err, jobs: fs.length }, "taking back the attempts of started jobs whose host is not ready failed; they are given back uncalled");
      this.d.line.giveBackUncalled(fs);
      return [];
    }
    // The call the claim counted goes with its attempt (each job is its InFlight's own object).
    for (const j of jobs) j.calls--;
    return fs;
  }
}
