import { OutcomeNotRecorded } from "./completion-batcher.ts";
import type { HostLimiter } from "./host-limiter.ts";
import { type AttemptDeps, callAttempt } from "./attempt-call.ts";
import { HostAdmission } from "./host-admission.ts";
import type { InFlight, InFlightJobs, Phase } from "./in-flight.ts";
import { PreCallCheck } from "./pre-call-check.ts";
import type { SlotSizing } from "./slot-sizing.ts";
import { HandBack } from "./hand-back.ts";
import { RetryVerifier } from "./verify-before-retry.ts";
import type { WorkerOptions } from "./worker-options.ts";

export interface CallLineDeps {
  o: WorkerOptions;
  /** The worker's claimed jobs and their phases (in-flight.ts). */
  jobs: InFlightJobs;
  limiter: HostLimiter<InFlight>;
  sizing: SlotSizing;
  attempt: AttemptDeps;
  /** The worker is stopping: nothing more is checked; what waits is handed back. */
  stopping: () => boolean;
  /** Runs a promise the worker waits for on stop (and logs if it fails). */
  handled: (p: Promise<void>) => void;
  /** Room has grown: the worker may claim more. */
  noteRoom: () => void;
}

/**
 * The worker's second half (the state diagram is in worker.ts): from a claimed job whose
 * instant has come to its call. Jobs wait in line (`ready`) for room in the call slots; the
 * pump takes a batch at a time, asks each job's host for room (held, deferred), diverts
 * those whose last call may have been delivered to verify-before-retry, runs the pre-call
 * check for the rest in one statement, arms what passed and calls it as slots free. The
 * first half, the claims, is the Worker's: it hands jobs over through opened() (due) or
 * arm() (a claim that was their pre-call check).
 */
export class CallLine {
  private readonly o: WorkerOptions;
  private readonly jobs: InFlightJobs;
  private readonly count: Readonly<Record<Phase, number>>;
  private readonly sizing: SlotSizing;
  private readonly attempt: AttemptDeps;
  /** Asks each job's host for room; runs the passes over the jobs held for it (phase `held`). */
  private readonly hosts: HostAdmission;
  private readonly check: PreCallCheck;
  private readonly back: HandBack;
  /** Each call in flight, or answered and waiting for its outcome's write, by its job. */
  private readonly calls = new Map<InFlight, Promise<void>>();
  /**
   * Claimed jobs whose instant has come, in order, waiting for a call slot. The pump takes
   * as many as there are free slots, checks them in one statement and calls them: one
   * pre-call check at a time, so each one carries every slot freed while the last ran.
   */
  private readonly ready: InFlight[] = [];
  /** Checked (attempt opened, lease extended) and waiting for a call slot: at most armAhead() beyond the slots. */
  private readonly armed: { f: InFlight; attemptId: string; number: number; catchup: boolean }[] = [];
  private pumping: Promise<void> | undefined;
  private pumpAgain = false;

  constructor(private readonly d: CallLineDeps) {
    this.o = d.o;
    this.jobs = d.jobs;
    this.count = d.jobs.counts;
    this.sizing = d.sizing;
    this.attempt = d.attempt;
    const o = d.o;
    this.back = new HandBack({ o, jobs: d.jobs, limiter: d.limiter, stopping: d.stopping, handled: d.handled });
    this.hosts = new HostAdmission({
      o,
      jobs: d.jobs,
      limiter: d.limiter,
      back: this.back,
      begin: (fs) => this.begin(fs),
      stopping: d.stopping,
      handled: d.handled,
    });
    const verifier = new RetryVerifier({
      db: o.db,
      owner: o.owner,
      log: o.log,
      metrics: o.metrics,
      keyring: o.keyring,
      allowPrivateTargets: o.allowPrivateTargets,
      // Stopping meanwhile: not called, handed back at once (like jobs waiting for their host).
      resume: (fs) => (this.stopping ? this.returnHeld(fs) : this.begin(fs)),
      giveBack: (fs) => this.returnHeld(fs),
      finished: (f) => {
        this.jobs.release(f, "verified");
        this.noteRoom();
        this.hosts.kick();
      },
      background: (p) => this.handled(p),
    });
    this.check = new PreCallCheck({
      o,
      jobs: d.jobs,
      sizing: d.sizing,
      verifier,
      back: this.back,
      arm: (f, attemptId, number, catchup) => this.arm(f, attemptId, number, catchup),
      launchArmed: () => this.launchArmed(),
    });
  }

  private get stopping(): boolean {
    return this.d.stopping();
  }

  private handled(p: Promise<void>): void {
    this.d.handled(p);
  }

  private noteRoom(): void {
    this.d.noteRoom();
  }

  /** Calls in flight, or answered and waiting for their outcome's write. */
  get callsInFlight(): number {
    return this.calls.size;
  }

  /** Resolves when every call launched so far has ended and its outcome is written (or given up). */
  async callsDone(): Promise<void> {
    await Promise.all(this.calls.values());
  }

  /** Resolves when the pump's run under way (if any) has ended. */
  async settled(): Promise<void> {
    await this.pumping;
  }

  /**
   * For stop(): the jobs not called that wait in memory (for their host, or for a call slot),
   * taken out of the line; the caller hands them back. The held pass's timer is stopped.
   */
  takeWaiting(): InFlight[] {
    this.hosts.disarm();
    return [...this.d.limiter.drainHeld(), ...this.ready.splice(0)];
  }

  /** A held job was cancelled: the next pass over held jobs gives it back. */
  kickHeld(): void {
    this.hosts.kick();
  }

  /** Jobs not called after all, whose attempt may be open: released, and given back in the background. */
  giveBackUncalled(fs: InFlight[]): void {
    this.back.giveBackUncalled(fs);
  }

  /** Jobs whose due instant has come: in line for a call slot. */
  async opened(fs: InFlight[]): Promise<void> {
    for (const f of fs) {
      this.jobs.enter(f, "ready");
      this.ready.push(f);
    }
    await this.pump();
  }

  /** Takes a job out of the line for a call slot (a cancel); false if it was not there. */
  unready(id: string): boolean {
    const i = this.ready.findIndex((f) => f.job.id === id);
    if (i < 0) return false;
    this.ready.splice(i, 1);
    return true;
  }

  /**
   * Starts jobs from the line while call slots are free, one batch at a time: each pre-call
   * check takes every slot freed while the last one ran, so checks are paid per batch and
   * the line never waits behind more than one of them.
   */
  private pump(): Promise<void> {
    if (this.pumping) {
      this.pumpAgain = true;
      return this.pumping;
    }
    this.pumping = this.runPump().finally(() => {
      this.pumping = undefined;
      if (this.pumpAgain) {
        this.pumpAgain = false;
        if (this.ready.length > 0) this.handled(this.pump());
      }
    });
    return this.pumping;
  }

  private async runPump(): Promise<void> {
    for (;;) {
      this.pumpAgain = false;
      const c = this.count;
      const room = this.o.concurrency + this.sizing.armAhead() - c.calling - c.starting - c.armed;
      // While armed jobs fill the slots that free, a check waits for room for half a batch:
      // started for the one slot free at that moment, it held the line for a round trip while
      // every other slot freed (checks went 1, 63, 1, 63 jobs). With nothing armed or in
      // flight, any room is used at once.
      const minBatch = c.armed > 0 || c.calling > 0 ? Math.ceil(this.o.concurrency / 2) : 1;
      if (room <= 0 || this.ready.length === 0 || this.stopping) return;
      if (this.sizing.armAhead() > 0 && room < Math.min(minBatch, this.ready.length)) return;
      const batch = this.takeReady(room);
      if (batch.length === 0) return;
      for (const f of batch) this.jobs.enter(f, "starting");
      try {
        await this.hosts.admit(batch);
      } catch (err) {
        // Each job of the batch is accounted for (called, given back or left to its lease).
        this.o.log.error(
          { err, jobs: batch.length },
          "starting claimed jobs failed; those not given back at once wait for their leases to lapse, then are retried",
        );
      }
      this.noteRoom();
    }
  }

  /** Up to `room` jobs from the line, in order; with reserved slots, those below their class only into the others. */
  private takeReady(room: number): InFlight[] {
    const rs = this.o.reservedSlots;
    if (!rs) return this.ready.splice(0, room);
    let lowRoom = this.o.concurrency - rs.slots - this.count.starting;
    for (const f of this.jobs.values()) if (f.phase === "calling" && f.job.priority < rs.minPriority) lowRoom--;
    const out: InFlight[] = [];
    for (let i = 0; i < this.ready.length && out.length < room; ) {
      const f = this.ready[i]!;
      if (f.job.priority >= rs.minPriority || lowRoom > 0) {
        if (f.job.priority < rs.minPriority) lowRoom--;
        out.push(f);
        this.ready.splice(i, 1);
      } else i++;
    }
    return out;
  }

  /** Calls armed jobs while call slots are free; one whose cancel or lease loss came meanwhile is given back uncalled. */
  launchArmed(): void {
    const gone: InFlight[] = [];
    // A stopping worker calls what it checked: the grace period covers it like any call.
    while (this.armed.length > 0 && (this.count.calling < this.o.concurrency || this.stopping)) {
      const a = this.armed.shift()!;
      if (a.f.abort.signal.aborted) gone.push(a.f);
      else this.launch(a.f, a.attemptId, a.number, a.catchup);
    }
    if (gone.length > 0) this.giveBackUncalled(gone);
  }

  /** Checked (attempt opened): in line for the next free call slot. */
  arm(f: InFlight, attemptId: string, number: number, catchup: boolean): void {
    this.jobs.enter(f, "armed");
    this.armed.push({ f, attemptId, number, catchup });
  }

  /** The pre-call check for jobs whose host slot is reserved, then one call per job that passes it. */
  begin(fs: InFlight[]): Promise<void> {
    return this.check.run(fs);
  }

  /** Jobs not called after all, no attempt open (a cancel, a lost lease, a stop): back to the database at once. */
  returnHeld(fs: InFlight[]): Promise<void> {
    return this.back.returnHeld(fs);
  }

  /** Calls the target: `calling` (what WORKER_CONCURRENCY bounds) until it answers, then `finishing` until the outcome is written. */
  private launch(f: InFlight, attemptId: string, number: number, catchup: boolean): void {
    this.jobs.enter(f, "calling");
    // Keyed by the job: the call takes itself out when it ends (its first await comes before).
    this.calls.set(f, this.call(f, attemptId, number, catchup));
  }

  /**
   * The call and its outcome's write, then the job's release. One async function, not a
   * chain of catch and finally: two promises and four functions fewer a call (part 30).
   */
  private async call(f: InFlight, attemptId: string, number: number, catchup: boolean): Promise<void> {
    const launchedAt = performance.now();
    try {
      await callAttempt(this.attempt, f, attemptId, number, catchup, () => this.called(f, launchedAt));
    } catch (err) {
      // The batcher has logged an outcome it gave up on, with what it was.
      if (!(err instanceof OutcomeNotRecorded))
        this.o.log.error({ err, job_id: f.job.id }, "recording the outcome failed; the lease will lapse and the job will be retried");
    } finally {
      this.called(f, launchedAt);
      this.jobs.release(f, "recorded");
      this.calls.delete(f);
      if (this.ready.length > 0) this.handled(this.pump());
      // Even with jobs in line: the pump may start none of them (too little room for a
      // check yet), and the claim room has grown all the same.
      this.noteRoom();
      this.hosts.kick();
    }
  }

  /**
   * The target has answered (or the call ended without an answer): the call slot is free. It
   * is free once the target has answered, not once the outcome is written: the write is
   * batched with others, and a slot held through it would make every call wait for a commit.
   * The job stays in `jobs` (its lease renewed) until it is written, and the claim room counts
   * it, so unwritten outcomes cannot pile up unbounded.
   */
  private called(f: InFlight, launchedAt: number): void {
    if (f.phase !== "calling") return;
    this.jobs.enter(f, "finishing");
    this.sizing.callEnded(performance.now() - launchedAt);
    this.launchArmed();
    if (this.ready.length > 0) this.handled(this.pump());
  }
}
