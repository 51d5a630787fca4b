import type { Db } from "../store/db.ts";
import type { ClaimedJob, ClaimRow } from "../store/types.ts";
import type { LocalRoom, LocalWorker } from "../dispatcher/local-worker.ts";
import { claimQueued, deferJobs, releaseJobs, startAttempts, unstartAtClaim } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { CompletionBatcher, OutcomeNotRecorded } from "./completion-batcher.ts";
import { laneKey } from "./host-lane.ts";
import { HostLimiter } from "./host-limiter.ts";
import type { SigningKeyring } from "./signing-keyring.ts";
import { LeaseRenewer } from "./lease-renewer.ts";
import { ABORT_CANCEL, ABORT_STOP } from "./abort-reasons.ts";
import { DueGate } from "./due-gate.ts";
import { PayloadCache } from "./payload-cache.ts";
import { type AttemptDeps, callAttempt } from "./attempt-call.ts";
import { HeldPump } from "./held-pump.ts";
import { QueueClaims } from "./queue-claims.ts";
import { type InFlight, InFlightJobs, type Phase } from "./in-flight.ts";
import { SlotLedger, type SlotLoad } from "./slot-ledger.ts";
import { SlotSizing } from "./slot-sizing.ts";
import { giveBackUncalled } from "./give-back-uncalled.ts";
import { DbClock } from "../time/db-clock.ts";
import { RetryVerifier } from "./verify-before-retry.ts";

export interface WorkerOptions {
  db: Db;
  /** Lease owner token: unique per process. */
  owner: string;
  /** This process's region: the worker calls nothing unless it holds the region authority. */
  region: string;
  concurrency: number;
  /**
   * Jobs held claimed beyond the calls in flight, ready for the next free call slot, at most:
   * claims (and pre-call checks) are then paid per batch, not per freed slot. The worker
   * asks for as many as it calls in about PREFETCH_HORIZON_MS (slot-sizing.ts), never fewer than its
   * concurrency, never more than this.
   */
  prefetch?: number;
  /** A dispatcher in this process: told when the worker has room for a batch of due jobs. */
  onRoom?: () => void;
  leaseTtlMs: number;
  /**
   * The clock-skew margin: a call starts only on a lease live for at least this long, and is
   * aborted once its lease has gone unrenewed for leaseTtlMs minus this.
   */
  leaseMarginMs: number;
  /** Async jobs: the lease an accepted job runs under until its target's first heartbeat. */
  asyncLeaseMs: number;
  pollIntervalMs: number;
  shutdownGraceMs: number;
  /** Signing keys per tenant and schedule (and the SCHEDULER_SIGNING_SECRET fallback), kept in memory. */
  keyring?: SigningKeyring;
  allowPrivateTargets: boolean;
  log: Logger;
  metrics: Metrics;
  /** Per-target-host limits (calls per second, calls in flight) and the slowdown floor; absent: unlimited. */
  hostLimits?: { ratePerSec?: number; concurrency?: number; floorPerSec?: number };
  /** Slots that serve only jobs of at least this priority (the rest serve any job). */
  reservedSlots?: { slots: number; minPriority: number };
  /** Pre-staging: also take queued jobs due this many ms from now, each held until due. */
  prestageMs?: number;
  /**
   * Test seam: runs between the claim and the pre-call check, to force races there (for jobs
   * a claim started, whose claim was their check, it runs before they are armed).
   */
  beforeStart?: (jobs: ClaimedJob[]) => Promise<void>;
  /**
   * Test seam: runs once the pre-call check's statement has answered; a throw here is a reply
   * lost after the commit (the client cannot tell whether it committed).
   */
  afterStartAttempts?: (jobIds: string[]) => Promise<void>;
  /** The database's clock, to plan when a claimed job's due instant comes (absent: the process clock). */
  clock?: DbClock;
}

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
  private readonly attempt: AttemptDeps;
  private readonly slots: SlotLedger;
  /** The prefetch and how far ahead checks arm, from the calls and checks measured. */
  private readonly sizing: SlotSizing;
  /** Runs passes over the jobs held for their host (phase `held`; the limiter keeps their order). */
  private readonly held: HeldPump;
  /** Claimed jobs not due yet (pre-staged): they keep their call slot and wait for their instant. */
  private readonly gate: DueGate<InFlight>;
  private readonly clock: DbClock;
  private readonly verifier: RetryVerifier;
  private sweepTimer: ReturnType<typeof setInterval> | undefined;
  private readonly calls = new Set<Promise<void>>();
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
      (fs) => this.handled(this.opened(fs)),
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
    this.attempt = {
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
    this.held = new HeldPump(
      this.limiter,
      () => this.heldPass(),
      (p) => this.handled(p),
    );
    this.claims = new QueueClaims(this, o.log, o.pollIntervalMs);
    this.verifier = new RetryVerifier({
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
        this.held.kick(this.count.held);
      },
      background: (p) => this.handled(p),
    });
    this.slots = new SlotLedger(o.reservedSlots);
    this.sizing = new SlotSizing({ concurrency: o.concurrency, prefetch: o.prefetch, reservedSlots: o.reservedSlots !== undefined });
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
        this.held.kick(this.count.held);
        break;
      case "gated":
      case "ready":
        // Waiting for its due instant or a call slot: given back now, which ends it cancelled.
        if (f.phase === "gated" ? this.gate.remove(id) : this.unready(id)) this.handled(this.returnHeld([f]));
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
    await this.pumping;
    this.launchArmed();
    clearInterval(this.sweepTimer);
    this.held.disarm();
    // Jobs waiting for their host or their due instant were never called: back to scheduled at once.
    const waiting = [...this.limiter.drainHeld(), ...this.gate.drain(), ...this.ready.splice(0)];
    if (waiting.length > 0) {
      try {
        await this.returnHeld(waiting);
      } catch (err) {
        this.o.log.error({ err }, "giving back jobs that waited for their host failed; their leases will lapse and they will be retried");
      }
    }
    await this.unlisten?.();
    await this.unlistenCancel?.();
    if (this.calls.size > 0) {
      this.o.log.info({ inflight: this.calls.size, grace_ms: this.o.shutdownGraceMs }, "stopping: waiting for calls in flight");
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), this.o.shutdownGraceMs)));
      const outcome = await Promise.race([Promise.all(this.calls), grace]);
      clearTimeout(timer);
      if (outcome === "timeout") {
        for (const f of this.jobs.values()) f.abort.abort(ABORT_STOP);
        await Promise.all(this.calls);
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
    this.handled(this.startClaimed(jobs));
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
    await this.startClaimed(claimed);
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

  /**
   * From claimed to called. Each job's host is asked first: room now → the pre-call check and
   * the call; room soon → it waits here (see pump); else it is handed back, due again later,
   * without a call and without using up an attempt.
   */
  private async startClaimed(claimed: ClaimRow[]): Promise<void> {
    try {
      await this.o.beforeStart?.(claimed);
    } catch (err) {
      for (const job of claimed) {
        const f = this.jobs.get(job.id);
        if (f) this.jobs.release(f, "failed");
      }
      throw err;
    }
    const now = this.clock.now();
    const open: InFlight[] = [];
    const startedAtClaim: ClaimRow[] = [];
    for (const job of claimed) {
      if (job.attempt_id !== null) {
        startedAtClaim.push(job);
        continue;
      }
      const f = this.jobs.get(job.id);
      if (!f) continue;
      if (job.due_at.getTime() >= now) {
        this.jobs.enter(f, "gated");
        this.gate.hold(job.id, job.due_at, f);
      } else open.push(f);
    }
    const unstarted = startedAtClaim.length > 0 ? this.armStarted(startedAtClaim) : [];
    if (unstarted.length > 0) open.push(...(await this.unstart(unstarted)));
    await this.opened(open);
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
      const f = this.jobs.get(job.id);
      if (!f) continue;
      if (f.abort.signal.aborted || performance.now() - f.leaseAt > this.o.leaseTtlMs - this.o.leaseMarginMs) {
        back.push(f);
        continue;
      }
      const a = this.limiter.admit(laneKey(job.target.url, job.tenant, job.host_limits), job.id, this.limiter.limitsOf(job.host_limits), f, now);
      if (a.kind === "go") this.arm(f, job.attempt_id!, job.calls, job.catchup);
      else {
        // Asked again on the ordinary path once the attempt is taken back.
        this.limiter.forget(job.id);
        notNow.push(job);
      }
    }
    this.launchArmed();
    if (back.length > 0) this.giveBackUncalled(back);
    return notNow;
  }

  /**
   * Takes back the attempts a claim opened for jobs that cannot be called now; the jobs stay
   * claimed and take the ordinary path (wait in memory, or deferred; checked by
   * StartAttempts). Returns them; if the statement fails, they are given back uncalled instead.
   */
  private async unstart(jobs: ClaimRow[]): Promise<InFlight[]> {
    const fs = jobs.flatMap((j) => this.jobs.get(j.id) ?? []);
    try {
      await unstartAtClaim(
        this.o.db,
        this.o.owner,
        jobs.map((j) => ({ id: j.id, gen: j.lease_generation, attemptId: j.attempt_id! })),
      );
    } catch (err) {
      this.o.log.warn({ err, jobs: fs.length }, "taking back the attempts of started jobs whose host is not ready failed; they are given back uncalled");
      this.giveBackUncalled(fs);
      return [];
    }
    // The call the claim counted goes with its attempt (each job is its InFlight's own object).
    for (const j of jobs) j.calls--;
    return fs;
  }

  /** Jobs not called after all, whose attempt may be open: released, and given back in the background. */
  private giveBackUncalled(fs: InFlight[]): void {
    for (const f of fs) this.jobs.release(f, "given back");
    this.handled(
      giveBackUncalled(
        { db: this.o.db, owner: this.o.owner, leaseTtlMs: this.o.leaseTtlMs, log: this.o.log, stopping: () => this.stopping },
        fs.map((f) => ({ id: f.job.id, gen: f.gen })),
      ),
    );
  }

  /** Jobs whose due instant has come: in line for a call slot. */
  private async opened(fs: InFlight[]): Promise<void> {
    for (const f of fs) {
      this.jobs.enter(f, "ready");
      this.ready.push(f);
    }
    await this.pump();
  }

  /** Takes a job out of the line for a call slot (a cancel); false if it was not there. */
  private unready(id: string): boolean {
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
        await this.admit(batch);
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
  private launchArmed(): void {
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
  private arm(f: InFlight, attemptId: string, number: number, catchup: boolean): void {
    this.jobs.enter(f, "armed");
    this.armed.push({ f, attemptId, number, catchup });
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

  /** Ask each job's host for room, then the pre-call check and the call. */
  private async admit(fs: InFlight[]): Promise<void> {
    // Cancelled or lease lost while waiting for the instant or a slot: not called.
    const gone = fs.filter((f) => f.abort.signal.aborted);
    if (gone.length > 0) await this.returnHeld(gone);
    const claimed = fs.filter((f) => !f.abort.signal.aborted && this.jobs.holds(f));
    if (claimed.length === 0) return;
    try {
      const now = Date.now();
      const deferred: { f: InFlight; delayMs: number }[] = [];
      const ready: InFlight[] = [];
      for (const f of claimed) {
        const { job } = f;
        const a = this.limiter.admit(laneKey(job.target.url, job.tenant, job.host_limits), job.id, this.limiter.limitsOf(job.host_limits), f, now);
        if (a.kind === "go") {
          ready.push(f);
          continue;
        }
        this.o.metrics.hostDeferrals.inc();
        if (a.kind === "hold") this.jobs.enter(f, "held");
        else deferred.push({ f, delayMs: a.at - now });
      }
      // Neither group waits out its leases because the other's statement failed: the jobs
      // cleared to go start first, and the others are handed back whatever happened to them.
      try {
        await this.begin(ready);
      } finally {
        if (deferred.length > 0) await this.defer(deferred);
      }
    } catch (err) {
      // Jobs claimed but never started (nor held, armed or verifying) stay leased until the reaper returns them.
      for (const f of claimed) if (f.phase === "starting") this.jobs.release(f, "failed");
      throw err;
    } finally {
      this.held.arm(this.heldLeft());
    }
  }

  /** Jobs whose host has no room for a while: handed back to the database, due again after `delayMs`. */
  private async defer(jobs: { f: InFlight; delayMs: number }[]): Promise<void> {
    try {
      await deferJobs(
        this.o.db,
        this.o.owner,
        jobs.map(({ f, delayMs }) => ({ id: f.job.id, gen: f.gen, delayMs })),
      );
      this.o.log.debug({ jobs: jobs.length }, "target hosts at their limit: jobs handed back, due again shortly");
    } finally {
      for (const { f } of jobs) this.jobs.release(f, "deferred");
    }
  }

  /**
   * A pass over the jobs held for their host (HeldPump runs one at a time): gives back the
   * cancelled, starts those whose host has room, hands back those held too long. Returns
   * how many are still held, for the pump's timer.
   */
  private async heldPass(): Promise<number> {
    if (this.stopping) return 0;
    try {
      const aborted = this.limiter.removeHeld((f) => f.abort.signal.aborted);
      if (aborted.length > 0) await this.returnHeld(aborted);
      const { ready, overdue } = this.limiter.pump(Date.now());
      if (overdue.length > 0) {
        // x.at is on this process's clock (the host's pacing): handed over as a wait.
        const now = Date.now();
        await this.defer(overdue.map((x) => ({ f: x.item, delayMs: x.at - now })));
      }
      await this.begin(ready);
    } catch (err) {
      this.o.log.error(
        { err },
        "starting jobs that waited for their host failed; those not given back at once wait for their leases to lapse, then are retried",
      );
    }
    return this.heldLeft();
  }

  /** Jobs held for their host, as the pump's timer counts them (none once stopping: stop() gives them back). */
  private heldLeft(): number {
    return this.stopping ? 0 : this.count.held;
  }

  /** The pre-call check for jobs whose host slot is reserved, then one call per job that passes it. */
  private async begin(fs: InFlight[]): Promise<void> {
    for (const f of fs) this.jobs.enter(f, "starting");
    // Verify before retry: a job whose last call may have been delivered asks its target first.
    const ready = this.verifier.divert(fs);
    if (ready.length < fs.length) {
      const go = new Set(ready);
      for (const f of fs) if (!go.has(f)) this.jobs.enter(f, "verifying");
    }
    if (ready.length === 0) return;
    let started: Awaited<ReturnType<typeof startAttempts>>;
    const sentAt = performance.now();
    try {
      started = await startAttempts(
        this.o.db,
        this.o.owner,
        this.o.region,
        ready.map((f) => ({ id: f.job.id, gen: f.gen, version: f.job.version })),
        {
          ttlMs: this.o.leaseTtlMs,
          marginMs: this.o.leaseMarginMs,
        },
      );
      const ms = performance.now() - sentAt;
      this.sizing.checked(ms);
      await this.o.afterStartAttempts?.(started.map((s) => s.job_id));
    } catch (err) {
      // No answer: the check may have committed and opened attempts, or not. Nothing is
      // called (its outcome could not be recorded against an attempt we do not know), and
      // everything is given back at once, not left for the reaper, which would count an
      // opened attempt as a lost call: a max_attempts 1 job would die uncalled.
      this.giveBackUncalled(ready);
      throw err;
    }
    // Opened attempts are called (or armed for the next free slot) before anything else can fail.
    for (const s of started) {
      const f = this.jobs.get(s.job_id);
      if (!f) continue;
      // The check extended the lease: the watchdog counts from it.
      f.leaseAt = Math.max(f.leaseAt, sentAt);
      this.arm(f, s.attempt_id, s.number, s.catchup);
    }
    this.launchArmed();
    try {
      const startedIds = new Set(started.map((s) => s.job_id));
      // Cancelled, rescheduled, reclaimed or its lease lapsed since the claim: not called.
      const stale = ready.filter((f) => !startedIds.has(f.job.id));
      if (stale.length > 0) {
        for (const f of stale) this.limiter.forget(f.job.id);
        const released = await releaseJobs(
          this.o.db,
          this.o.owner,
          stale.map((f) => ({ id: f.job.id, gen: f.gen })),
        );
        this.o.metrics.staleDispatches.inc(stale.length);
        for (const f of stale) {
          this.jobs.release(f, "stale");
          const r = released.find((x) => x.id === f.job.id);
          this.o.log.info({ job_id: f.job.id, status: r?.status ?? "reclaimed" }, "dispatch is stale (cancelled or changed since the claim); not calling");
        }
      }
    } catch (err) {
      for (const f of ready) if (f.phase === "starting") this.jobs.release(f, "failed");
      throw err;
    }
  }

  /** Jobs not called after all, no attempt open (a cancel, a lost lease, a stop): back to the database at once. */
  private async returnHeld(fs: InFlight[]): Promise<void> {
    try {
      await releaseJobs(
        this.o.db,
        this.o.owner,
        fs.map((f) => ({ id: f.job.id, gen: f.gen })),
      );
    } finally {
      for (const f of fs) this.jobs.release(f, "given back");
    }
  }

  /** Calls the target: `calling` (what WORKER_CONCURRENCY bounds) until it answers, then `finishing` until the outcome is written. */
  private launch(f: InFlight, attemptId: string, number: number, catchup: boolean): void {
    const id = f.job.id;
    this.jobs.enter(f, "calling");
    // The call slot is free once the target has answered, not once the outcome is written:
    // the write is batched with others, and a slot held through it would make every call
    // wait for a commit. The job stays in `jobs` (its lease renewed) until it is written,
    // and the claim room counts it, so unwritten outcomes cannot pile up unbounded.
    const launchedAt = performance.now();
    const called = () => {
      if (f.phase !== "calling") return;
      this.jobs.enter(f, "finishing");
      this.sizing.callEnded(performance.now() - launchedAt);
      this.launchArmed();
      if (this.ready.length > 0) this.handled(this.pump());
    };
    const p = callAttempt(this.attempt, f, attemptId, number, catchup, called)
      .catch((err) => {
        // The batcher has logged an outcome it gave up on, with what it was.
        if (!(err instanceof OutcomeNotRecorded))
          this.o.log.error({ err, job_id: id }, "recording the outcome failed; the lease will lapse and the job will be retried");
      })
      .finally(() => {
        called();
        this.jobs.release(f, "recorded");
        this.calls.delete(p);
        if (this.ready.length > 0) this.handled(this.pump());
        // Even with jobs in line: the pump may start none of them (too little room for a
        // check yet), and the claim room has grown all the same.
        this.noteRoom();
        this.held.kick(this.count.held);
      });
    this.calls.add(p);
  }
}
