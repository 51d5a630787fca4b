import type { ClaimedJob, ClaimRow } from "../store/types.ts";
import type { LocalRoom, LocalWorker } from "../dispatcher/local-worker.ts";
import { claimQueued } from "../store/worker-queries.ts";
import { CompletionBatcher } from "./completion-batcher.ts";
import { HostLimiter } from "./host-limiter.ts";
import { LeaseRenewer } from "./lease-renewer.ts";
import { ABORT_CANCEL, ABORT_STOP } from "./abort-reasons.ts";
import { DueGate } from "./due-gate.ts";
import { PayloadCache } from "./payload-cache.ts";
import type { AttemptDeps } from "./attempt-call.ts";
import { QueueClaims } from "./queue-claims.ts";
import { type InFlight, InFlightJobs, type Phase } from "./in-flight.ts";
import { SlotLedger, type SlotLoad } from "./slot-ledger.ts";
import { SlotSizing } from "./slot-sizing.ts";
import { CallLine } from "./call-line.ts";
import { ClaimIntake } from "./claim-intake.ts";
import { DbClock } from "../time/db-clock.ts";
import type { WorkerOptions } from "./worker-options.ts";

/**
 * Where a claimed job is in this worker (its Phase, in-flight.ts). Every claimed job is in
 * InFlightJobs, in exactly one phase, until release() takes it out: its outcome written, or
 * handed back uncalled.
 *
 *   claimed ─┬─ not due yet ──► gated ──its instant──┐
 *            ├─ due ─────────────────────────────────┴──► ready ──room in the slots──► starting
 *            └─ the claim was its check (attempt opened) ──────────────────────┐        │
 *                                                                              │        │ its host:
 *   starting ─┬─ host at its limit a short while ──► held ──host has room──► starting
 *             ├─ host at its limit for long ──► released (deferred, due again later)
 *             ├─ last call maybe delivered ──► verifying ──┬─ processed ──► released
 *             │                                            └─ not confirmed ──► starting
 *             ├─ check refused (cancelled, changed, lease gone) ──► released (stale)
 *             └─ check passed (attempt opened) ──► armed ◄──────────────────────┘
 *
 *   armed ──a call slot frees──► calling ──the target answered──► finishing ──outcome written──► released
 *
 * A cancel, a lost lease or a stop sends a job not called yet back to the database
 * (released, uncalled); once `calling`, it aborts the call instead.
 *
 * Three files share the diagram: this one claims and holds the room, the leases and the
 * lifecycle; claim-intake.ts sorts a claimed batch (gated, ready, or armed at once);
 * call-line.ts takes `ready` to `released` (host limits, verify, the check, the calls).
 */
/** Jobs a claim from the queue takes at most. */
const MAX_CLAIM = 500;
/** The smallest batch worth a claim that starts its jobs (see claimsOnlyWhatStarts). */
const MIN_START_BATCH = 8;

/**
 * Claims queued jobs under a lease, checks each again right before calling, calls the
 * target outside any transaction, renews leases while calls run, and writes outcomes with
 * a generation-checked update. stop() stops claiming, lets calls finish for the grace
 * period, aborts what is left and writes every outcome before returning.
 */
export class Worker implements LocalWorker {
  /** Every claimed job of this worker, with its phase: the one owner of per-job state. */
  private readonly jobs: InFlightJobs;
  private readonly count: Readonly<Record<Phase, number>>;
  /** Its claimed jobs by id, to look at (tests, and the lease renewer through the map itself). */
  get inflight(): ReadonlyMap<string, InFlight> {
    return this.jobs.map;
  }
  /** Resolves when the claim loop has looked at the queue once more (PeriodicLoop.passDone). */
  claimPassDone(o: { poke?: boolean } = {}): Promise<void> {
    return this.claims.passDone(o);
  }
  private readonly claims: QueueClaims;
  private readonly completions: CompletionBatcher;
  private readonly renewer: LeaseRenewer;
  private readonly limiter: HostLimiter<InFlight>;
  private readonly slots: SlotLedger;
  /** The prefetch and how far ahead checks arm, from the calls and checks measured. */
  private readonly sizing: SlotSizing;
  /** Claimed jobs not due yet (pre-staged): they keep their call slot and wait for their instant. */
  private readonly gate: DueGate<InFlight>;
  private readonly clock: DbClock;
  /** From a due claimed job to its call: the line for the call slots, host limits, the pre-call check, the calls. */
  private readonly line: CallLine;
  /** From a claimed batch to gated, in line or armed. */
  private readonly intake: ClaimIntake;
  private sweepTimer: ReturnType<typeof setInterval> | undefined;
  /** The last claim from the queue was full: more may be waiting there. */
  private queueBacklog = false;
  private started = false;
  private stopping = false;
  private unlisten: (() => Promise<void>) | undefined;
  private unlistenCancel: (() => Promise<void>) | undefined;

  constructor(private readonly o: WorkerOptions) {
    this.jobs = new InFlightJobs({ forget: (id) => this.limiter.forget(id), reservedMin: o.reservedSlots?.minPriority, log: o.log });
    this.count = this.jobs.counts;
    this.clock = o.clock ?? new DbClock();
    // Due instants are the database's: the gate waits for them on its clock (the pre-call
    // check asks its now() again).
    this.gate = new DueGate<InFlight>(
      (fs) => this.handled(this.line.opened(fs)),
      () => this.clock.now(),
    );
    this.completions = new CompletionBatcher(o.db, o.owner, o.log, o.metrics);
    this.renewer = new LeaseRenewer({ db: o.db, owner: o.owner, leaseTtlMs: o.leaseTtlMs, marginMs: o.leaseMarginMs, log: o.log, inflight: this.jobs.map });
    const hl = o.hostLimits ?? {};
    this.limiter = new HostLimiter<InFlight>({
      ratePerSec: hl.ratePerSec,
      concurrency: hl.concurrency,
      floorPerSec: hl.floorPerSec ?? 0.5,
      // Held jobs take no call slot, so they are bounded on their own (their rows are in memory).
      maxHeld: Math.max(200, 2 * o.concurrency),
    });
    const attempt: AttemptDeps = {
      db: o.db,
      owner: o.owner,
      log: o.log,
      metrics: o.metrics,
      limiter: this.limiter,
      payloads: new PayloadCache(o.db),
      clock: this.clock,
      completions: this.completions,
      keyring: o.keyring,
      allowPrivateTargets: o.allowPrivateTargets,
      asyncLeaseMs: o.asyncLeaseMs,
    };
    this.claims = new QueueClaims(this, o.log, o.pollIntervalMs);
    this.slots = new SlotLedger(o.reservedSlots);
    this.sizing = new SlotSizing({ concurrency: o.concurrency, prefetch: o.prefetch, reservedSlots: o.reservedSlots !== undefined });
    this.line = new CallLine({
      o,
      jobs: this.jobs,
      limiter: this.limiter,
      sizing: this.sizing,
      attempt,
      stopping: () => this.stopping,
      handled: (p) => this.handled(p),
      noteRoom: () => this.noteRoom(),
    });
    this.intake = new ClaimIntake({ o, jobs: this.jobs, clock: this.clock, gate: this.gate, limiter: this.limiter, line: this.line });
    o.metrics.callsInFlight = () => this.count.calling;
  }

  /** What the slot ledger weighs a claim against. */
  private load(): SlotLoad {
    // Claims may hold more than the calls in flight: the prefetch waits in `ready`.
    const capacity = this.o.concurrency + this.sizing.prefetchTarget();
    return {
      capacity,
      // Jobs waiting for their host take no slot: they are few (a short wait each, a bounded
      // number) and other hosts' jobs must not wait behind them. Calls that ended and wait for
      // their outcome's write hold no room for claims (up to a capacity's worth): the write
      // is batched and may take a commit or two, and claims held back by it left the slots idle.
      busy: this.jobs.size - this.count.held - Math.min(this.count.finishing, capacity),
      busyBelow: this.jobs.busyBelow(),
      closed: this.stopping,
    };
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopping = false;
    this.unlisten = await this.o.db.listen(
      "scheduler_queued",
      () => this.poke(),
      () => this.poke(),
    );
    // A cancelled running job: abort its call now. Renewal also sees the flag, so a lost
    // notification only delays the abort.
    this.unlistenCancel = await this.o.db.listen("scheduler_cancel", (id) => this.cancelled(id));
    this.renewer.start();
    this.sweepTimer = setInterval(() => {
      this.limiter.sweep();
      this.o.metrics.throttledHosts.set(this.limiter.throttledHosts());
    }, 1000);
    this.sweepTimer.unref?.();
    this.claims.start();
  }

  /** A cancel was requested for job `id`: not called yet → given back (which ends it cancelled); calling → the call is aborted. */
  private cancelled(id: string): void {
    const f = this.jobs.get(id);
    switch (f?.phase) {
      case "armed":
        // Checked, not called yet: the launch sees the abort and gives it back uncalled.
        f.abort.abort(ABORT_CANCEL);
        break;
      case "calling":
      case "finishing":
        this.o.log.info({ job_id: id }, "cancel requested; aborting the call");
        f.abort.abort(ABORT_CANCEL);
        break;
      case "held":
        // Waiting for its host: not called; given back (and so cancelled) by the next pass.
        f.abort.abort(ABORT_CANCEL);
        this.line.kickHeld();
        break;
      case "gated":
      case "ready":
        // Waiting for its due instant or a call slot: given back now, which ends it cancelled.
        if (f.phase === "gated" ? this.gate.remove(id) : this.line.unready(id)) this.handled(this.line.returnHeld([f]));
        break;
      default:
        // Claimed or in a check (or a verify) under way: the check itself sees the cancel in
        // the database, and renewal sees the flag.
        break;
    }
  }

  /** Look for queued work now (a dispatcher in this process just queued some). */
  poke(): void {
    this.claims.poke();
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.stopping = true;
    await this.claims.stop();
    await Promise.all(this.handoffs);
    await this.line.settled();
    this.line.launchArmed();
    clearInterval(this.sweepTimer);
    // Jobs waiting for their host, a call slot or their due instant were never called: back to scheduled at once.
    const waiting = [...this.line.takeWaiting(), ...this.gate.drain()];
    if (waiting.length > 0) {
      try {
        await this.line.returnHeld(waiting);
      } catch (err) {
        this.o.log.error({ err }, "giving back jobs that waited for their host failed; their leases will lapse and they will be retried");
      }
    }
    await this.unlisten?.();
    await this.unlistenCancel?.();
    if (this.line.callsInFlight > 0) {
      this.o.log.info({ inflight: this.line.callsInFlight, grace_ms: this.o.shutdownGraceMs }, "stopping: waiting for calls in flight");
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), this.o.shutdownGraceMs)));
      const outcome = await Promise.race([this.line.callsDone(), grace]);
      clearTimeout(timer);
      if (outcome === "timeout") {
        for (const f of this.jobs.values()) f.abort.abort(ABORT_STOP);
        await this.line.callsDone();
      }
    }
    await this.completions.drain();
    await this.renewer.stop();
    this.started = false;
  }

  /**
   * One pass of the claim loop (QueueClaims): claims from the queue for the slots free now,
   * the reserved class first. Returns how many jobs it claimed.
   */
  async claimPass(): Promise<number> {
    const n = await this.withRoom(MAX_CLAIM, async (free, high) => {
      // Reserved slots first: their class must not wait behind the general claim.
      let n = high > 0 ? await this.runOnce(high, this.o.reservedSlots!.minPriority) : 0;
      if (free > 0) n += await this.runOnce(free);
      this.queueBacklog = n >= free + high;
      return n;
    });
    return n ?? 0;
  }

  /**
   * Room for one claim of up to `max` jobs: promised before the claim is sent (so two claims
   * cannot overshoot it), given back when `use` ends. `any` for any priority, `reserved` for
   * the reserved class only. Undefined, `use` not run, when there is none.
   */
  private async withRoom<T>(max: number, use: (any: number, reserved: number) => Promise<T>): Promise<T | undefined> {
    const load = this.load();
    const any = this.slots.take(max, load);
    const reserved = this.slots.takeReserved(max - any, load);
    if (any + reserved === 0) return undefined;
    try {
      return await use(any, reserved);
    } finally {
      this.slots.giveBack(any);
      this.slots.giveBackReserved(reserved);
    }
  }

  get owner(): string {
    return this.o.owner;
  }

  /**
   * LocalWorker: one claim by the dispatcher in this process, for up to `max` jobs, in the
   * worker's room (withRoom). Every batch the claim hands over is this worker's from its
   * commit on, even if the claim then throws. Undefined, without running the claim, when it
   * would not be a batch worth its statements (wantsMore) or there is no room.
   */
  async fill(max: number, claim: (room: LocalRoom, hand: (jobs: ClaimRow[], roundTripMs: number) => void) => Promise<void>): Promise<ClaimRow[] | undefined> {
    if (!this.wantsMore()) return undefined;
    return this.withRoom(max, async (any, reserved) => {
      const got: ClaimRow[] = [];
      const room = { any, reserved, startLimit: this.startRoom(), onlyWhatStarts: this.claimsOnlyWhatStarts() };
      await claim(room, (jobs, roundTripMs) => {
        if (jobs.length === 0) return;
        this.accept(jobs, roundTripMs);
        for (const j of jobs) got.push(j);
      });
      return got;
    });
  }

  /**
   * How many jobs a claim may start now (its statement being their pre-call
   * check, see ClaimDueIds): what the pump would check at once, beyond the jobs already in
   * line. None with per-host limits configured or reserved slots (those jobs go through the
   * limiter and the slot classes before their check) or pre-staging (its jobs wait in memory
   * for their instant by design).
   */
  private startRoom(): number {
    if (!this.canStartAtClaim()) return 0;
    const c = this.count;
    return Math.max(0, this.o.concurrency + this.sizing.armAhead() - c.calling - c.starting - c.armed - c.ready);
  }

  /**
   * Whether the dispatcher in this process claims only what can start at once
   * (startRoom), each claim the pre-call check of its jobs, so that nothing waits claimed in
   * memory for a separate check. Only with enough call slots that half of them make a batch
   * (MIN_START_BATCH): a claim pass is three statements where a check is one, and claims of
   * one or two jobs cost more than prefetching and checking (with 2 slots on PGlite the rate
   * halved). Otherwise claims prefetch as before, and start only what can start of them.
   */
  private claimsOnlyWhatStarts(): boolean {
    return this.o.concurrency >= 2 * MIN_START_BATCH && this.canStartAtClaim();
  }

  private canStartAtClaim(): boolean {
    return !this.stopping && !this.o.reservedSlots && !this.o.hostLimits?.ratePerSec && !this.o.hostLimits?.concurrency && !this.o.prestageMs;
  }

  /**
   * Jobs a dispatcher in this process claimed straight into running under our lease.
   * `roundTripMs`: how long that claim took; a claim that started jobs was their pre-call
   * check, and sizes how far ahead of the slots jobs are armed (armAhead).
   */
  private accept(jobs: ClaimRow[], roundTripMs: number): void {
    if (jobs.some((j) => j.attempt_id !== null)) {
      this.sizing.checked(roundTripMs);
    }
    this.reserve(jobs, performance.now());
    this.handled(this.intake.take(jobs));
  }

  /** One claim pass: returns how many jobs were claimed. */
  async runOnce(limit: number, minPriority?: number): Promise<number> {
    const sentAt = performance.now();
    const claimed = await claimQueued(this.o.db, {
      owner: this.o.owner,
      limit,
      leaseTtlMs: this.o.leaseTtlMs,
      region: this.o.region,
      horizonMs: this.o.prestageMs,
      minPriority,
    });
    if (claimed.length === 0) return 0;
    this.reserve(claimed, sentAt);
    await this.intake.take(claimed);
    return claimed.length;
  }

  /** `leaseAt`: when the claim that took these leases was sent (the renewer's watchdog counts from it). */
  private reserve(jobs: ClaimedJob[], leaseAt: number): void {
    for (const job of jobs) this.jobs.add(job, leaseAt);
  }

  private readonly handoffs = new Set<Promise<void>>();
  private handled(p: Promise<void>): void {
    const q = p
      .catch((err) =>
        this.o.log.error({ err }, "starting handed-over jobs failed; those not given back at once wait for their leases to lapse, then are retried"),
      )
      .finally(() => this.handoffs.delete(q));
    this.handoffs.add(q);
  }

  /** Room for half of what the worker may hold: the dispatcher in this process claims a batch. */
  private noteRoom(): void {
    if (this.stopping) return;
    if (!this.wantsMore()) return;
    this.o.onRoom?.();
    // The queue is looked at again now only if the last look left work there (or nothing in
    // this process feeds the worker); else NOTIFY and the poll interval bring it.
    if (this.queueBacklog || !this.o.onRoom) this.claims.poke();
  }

  /** Whether a claim for this worker would be a batch worth its statement (or the worker is idle). */
  wantsMore(): boolean {
    if (this.stopping) return false;
    // Claims that start their jobs come when half a batch of slots can start (as the pump's
    // checks do), not to fill a prefetch: what they bring is called at once.
    if (this.claimsOnlyWhatStarts() && this.jobs.size > 0) return this.startRoom() >= Math.ceil(this.o.concurrency / 2);
    const capacity = this.o.concurrency + this.sizing.prefetchTarget();
    // The reserved class must not wait for a batch's worth of room: its slots are few.
    const load = this.load();
    if (this.o.reservedSlots && this.slots.room(load) > 0) return true;
    return this.slots.free(load) * 2 >= capacity || this.jobs.size === 0;
  }
}
