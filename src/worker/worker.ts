import type { Db } from "../store/db.ts";
import type { ClaimedJob, ClaimRow } from "../store/types.ts";
import { claimQueued, deferJobs, releaseJobs, startAttempts, unstartAtClaim } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { Sleeper } from "../time/sleeper.ts";
import { CompletionBatcher, OutcomeNotRecorded } from "./completion-batcher.ts";
import { HostLimiter, laneKey } from "./host-limiter.ts";
import type { SigningKeyring } from "./signing-keyring.ts";
import { LeaseRenewer } from "./lease-renewer.ts";
import { ABORT_CANCEL, ABORT_STOP } from "./abort-reasons.ts";
import { DueGate } from "./due-gate.ts";
import { PayloadCache } from "./payload-cache.ts";
import { type AttemptDeps, callAttempt } from "./attempt-call.ts";
import { HeldPump } from "./held-pump.ts";
import { SlotLedger } from "./slot-ledger.ts";
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
   * asks for as many as it calls in about PREFETCH_HORIZON_MS, never fewer than its
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

export interface InFlight {
  job: ClaimedJob;
  gen: number;
  abort: AbortController;
  /** performance.now() just before the last statement that extended the lease was sent. */
  leaseAt: number;
}

/** Jobs a claim from the queue takes at most. */
const MAX_CLAIM = 500;
/** How far ahead of its calls the worker keeps claimed jobs at hand: the call rate × this. */
const PREFETCH_HORIZON_MS = 250;
/**
 * Calls at least this short (on average) let the worker open the next slots' attempts while
 * the current calls run (see armAhead): an armed job then waits for its slot about one call.
 */
const ARM_MAX_CALL_MS = 100;
/**
 * Armed jobs per call slot at most (a slow database makes each check bring more). In one
 * process each claim is the check, and claims run one after another: with 4 a slot, a claim
 * brought ~130 jobs per ~15 ms round trip and the slots sat idle most of it (4.3k calls/s);
 * with 16 it brings what the slots call in its round trip. An armed job still waits about
 * one round trip at most: armAhead sizes the arming by what the slots call meanwhile.
 */
const ARM_MAX_FACTOR = 16;
/** The smallest batch worth a claim that starts its jobs (see claimsOnlyWhatStarts). */
const MIN_START_BATCH = 8;

/**
 * Claims queued jobs under a lease, checks each again right before calling, calls the
 * target outside any transaction, renews leases while calls run, and writes outcomes with
 * a generation-checked update. stop() stops claiming, lets calls finish for the grace
 * period, aborts what is left and writes every outcome before returning.
 */
export class Worker {
  readonly inflight = new Map<string, InFlight>();
  private readonly sleeper = new Sleeper();
  private readonly completions: CompletionBatcher;
  private readonly renewer: LeaseRenewer;
  private readonly limiter: HostLimiter<InFlight>;
  private readonly attempt: AttemptDeps;
  private readonly slots: SlotLedger;
  /** Claimed jobs waiting in memory for their host to have room (in `inflight` too, for lease renewal). */
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
  /** Jobs in a pre-call check under way (they hold call slots). */
  private starting = 0;
  private pumping: Promise<void> | undefined;
  private pumpAgain = false;
  /** The last claim from the queue was full: more may be waiting there. */
  private queueBacklog = false;
  /** Calls finished per second, smoothed: sizes the prefetch. */
  private callRate = 0;
  /** How long a call takes, smoothed (ms); undefined before the first. */
  private callMs: number | undefined;
  /** How long a pre-call check takes, smoothed (ms). */
  private checkMs: number | undefined;
  private rateAt = performance.now();
  private rateCount = 0;
  private loopDone: Promise<void> | undefined;
  private stopping = false;
  private unlisten: (() => Promise<void>) | undefined;
  private unlistenCancel: (() => Promise<void>) | undefined;

  constructor(private readonly o: WorkerOptions) {
    this.clock = o.clock ?? new DbClock();
    // Due instants are the database's: the gate waits for them on its clock (the pre-call
    // check asks its now() again).
    this.gate = new DueGate<InFlight>(
      (fs) => this.handled(this.opened(fs)),
      () => this.clock.now(),
    );
    this.completions = new CompletionBatcher(o.db, o.owner, o.log, o.metrics);
    this.renewer = new LeaseRenewer({ db: o.db, owner: o.owner, leaseTtlMs: o.leaseTtlMs, marginMs: o.leaseMarginMs, log: o.log, inflight: this.inflight });
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
    this.held = new HeldPump({
      limiter: this.limiter,
      stopping: () => this.stopping,
      giveBack: (fs) => this.returnHeld(fs),
      defer: async (overdue) => {
        try {
          // x.at is on this process's clock (the host's pacing): handed over as a wait.
          const now = Date.now();
          await deferJobs(
            this.o.db,
            this.o.owner,
            overdue.map((x) => ({ id: x.item.job.id, gen: x.item.gen, delayMs: x.at - now })),
          );
        } finally {
          for (const x of overdue) this.inflight.delete(x.item.job.id);
        }
      },
      begin: (ready) => this.begin(ready),
      background: (p) => this.handled(p),
    });
    this.verifier = new RetryVerifier({
      db: o.db,
      owner: o.owner,
      log: o.log,
      metrics: o.metrics,
      keyring: o.keyring,
      allowPrivateTargets: o.allowPrivateTargets,
      // Stopping meanwhile: not called, handed back at once (like jobs waiting for their host).
      resume: (fs) => (this.stopping ? this.giveBackVerified(fs) : this.begin(fs)),
      giveBack: (fs) => this.giveBackVerified(fs),
      finished: (f) => {
        this.limiter.forget(f.job.id);
        this.inflight.delete(f.job.id);
        this.noteRoom();
        this.held.kick();
      },
      background: (p) => this.handled(p),
    });
    // Jobs waiting for their host take no slot: they are few (a short wait each, a bounded
    // number) and other hosts' jobs must not wait behind them.
    this.slots = new SlotLedger({
      // Claims may hold more than the calls in flight: the prefetch waits in `ready`.
      concurrency: () => o.concurrency + this.prefetchTarget(),
      closed: () => this.stopping,
      reserved: o.reservedSlots,
      // Calls that ended and wait for their outcome's write hold no room for claims (up to a
      // capacity's worth): the write is batched and may take a commit or two, and claims
      // held back by it left the slots idle.
      busy: () => this.inflight.size - this.held.size - Math.min(this.recording, this.o.concurrency + this.prefetchTarget()),
      busyBelow: (min) => {
        let n = 0;
        for (const f of this.inflight.values()) if (f.job.priority < min && !this.held.has(f.job.id)) n++;
        return n;
      },
    });
  }

  async start(): Promise<void> {
    if (this.loopDone) return;
    this.stopping = false;
    this.unlisten = await this.o.db.listen(
      "scheduler_queued",
      () => this.poke(),
      () => this.poke(),
    );
    // A cancelled running job: abort its call now. Renewal also sees the flag, so a lost
    // notification only delays the abort.
    this.unlistenCancel = await this.o.db.listen("scheduler_cancel", (id) => {
      const f = this.inflight.get(id);
      if (f && this.armed.some((a) => a.f === f)) {
        // Checked, not called yet: the launch sees the abort and gives it back uncalled.
        f.abort.abort(ABORT_CANCEL);
      } else if (f && this.calling.has(id)) {
        this.o.log.info({ job_id: id }, "cancel requested; aborting the call");
        f.abort.abort(ABORT_CANCEL);
      } else if (f && this.held.has(id)) {
        // Waiting for its host: not called; given back (and so cancelled) by the next pump.
        f.abort.abort(ABORT_CANCEL);
        this.held.kick();
      } else if (f && (this.gate.remove(id) || this.unready(id))) {
        // Waiting for its due instant or a call slot: given back now, which ends it cancelled.
        this.handled(this.returnHeld([f]));
      }
    });
    this.renewer.start();
    this.sweepTimer = setInterval(() => {
      this.limiter.sweep();
      this.o.metrics.throttledHosts.set(this.limiter.throttledHosts());
    }, 1000);
    this.sweepTimer.unref?.();
    this.loopDone = this.loop();
  }

  /** Look for queued work now (a dispatcher in this process just queued some). */
  poke(): void {
    this.sleeper.wake();
  }

  async stop(): Promise<void> {
    if (!this.loopDone) return;
    this.stopping = true;
    this.sleeper.wake();
    await this.loopDone;
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
        for (const f of this.inflight.values()) f.abort.abort(ABORT_STOP);
        await Promise.all(this.calls);
      }
    }
    await this.completions.drain();
    await this.renewer.stop();
    this.loopDone = undefined;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const free = this.takeSlots(MAX_CLAIM);
      const high = this.takeReservedSlots(MAX_CLAIM - free);
      if (free + high > 0) {
        try {
          // Reserved slots first: their class must not wait behind the general claim.
          let n = high > 0 ? await this.runOnce(high, this.o.reservedSlots!.minPriority) : 0;
          if (free > 0) n += await this.runOnce(free);
          this.queueBacklog = n >= free + high;
          failures = 0;
          if (n > 0) continue;
        } catch (err) {
          failures++;
          this.o.log.error({ err, failures }, "worker claim failed; retrying");
          await this.sleeper.sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)));
          continue;
        } finally {
          this.giveBack(free);
          this.giveBackReserved(high);
        }
      }
      await this.sleeper.sleep(this.o.pollIntervalMs * (0.8 + Math.random() * 0.4));
    }
  }

  get owner(): string {
    return this.o.owner;
  }

  /** LocalWorker: promises up to n call slots to a claim; returns how many. */
  takeSlots(n: number): number {
    return this.slots.take(n);
  }

  giveBack(n: number): void {
    this.slots.giveBack(n);
  }

  takeReservedSlots(n: number): number {
    return this.slots.takeReserved(n);
  }

  giveBackReserved(n: number): void {
    this.slots.giveBackReserved(n);
  }

  /**
   * LocalWorker: how many jobs a claim may start now (its statement being their pre-call
   * check, see ClaimDueIds): what the pump would check at once, beyond the jobs already in
   * line. None with per-host limits configured or reserved slots (those jobs go through the
   * limiter and the slot classes before their check) or pre-staging (its jobs wait in memory
   * for their instant by design).
   */
  startRoom(): number {
    if (!this.canStartAtClaim()) return 0;
    return Math.max(0, this.o.concurrency + this.armAhead() - this.inCall.size - this.starting - this.armed.length - this.ready.length);
  }

  /**
   * LocalWorker: whether the dispatcher in this process claims only what can start at once
   * (startRoom), each claim the pre-call check of its jobs, so that nothing waits claimed in
   * memory for a separate check. Only with enough call slots that half of them make a batch
   * (MIN_START_BATCH): a claim pass is three statements where a check is one, and claims of
   * one or two jobs cost more than prefetching and checking (with 2 slots on PGlite the rate
   * halved). Otherwise claims prefetch as before, and start only what can start of them.
   */
  claimsOnlyWhatStarts(): boolean {
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
  accept(jobs: ClaimRow[], roundTripMs?: number): void {
    if (roundTripMs !== undefined && jobs.some((j) => j.attempt_id !== null)) {
      this.checkMs = this.checkMs === undefined ? roundTripMs : this.checkMs * 0.8 + roundTripMs * 0.2;
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
    for (const job of jobs) this.inflight.set(job.id, { job, gen: job.lease_generation, abort: new AbortController(), leaseAt });
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
      for (const job of claimed) this.inflight.delete(job.id);
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
      const f = this.inflight.get(job.id);
      if (!f) continue;
      if (job.due_at.getTime() >= now) this.gate.hold(job.id, job.due_at, f);
      else open.push(f);
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
      const f = this.inflight.get(job.id);
      if (!f) continue;
      if (f.abort.signal.aborted || performance.now() - f.leaseAt > this.o.leaseTtlMs - this.o.leaseMarginMs) {
        this.inflight.delete(job.id);
        back.push(f);
        continue;
      }
      const a = this.limiter.admit(laneKey(job.target.url, job.tenant, job.host_limits), job.id, this.limiter.limitsOf(job.host_limits), f, now);
      if (a.kind === "go") this.armed.push({ f, attemptId: job.attempt_id!, number: job.calls, catchup: job.catchup });
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
    const fs = jobs.flatMap((j) => this.inflight.get(j.id) ?? []);
    try {
      await unstartAtClaim(
        this.o.db,
        this.o.owner,
        jobs.map((j) => ({ id: j.id, gen: j.lease_generation, attemptId: j.attempt_id! })),
      );
    } catch (err) {
      this.o.log.warn({ err, jobs: fs.length }, "taking back the attempts of started jobs whose host is not ready failed; they are given back uncalled");
      for (const f of fs) this.inflight.delete(f.job.id);
      this.giveBackUncalled(fs);
      return [];
    }
    // The call the claim counted goes with its attempt (each job is its InFlight's own object).
    for (const j of jobs) j.calls--;
    return fs;
  }

  private giveBackUncalled(fs: InFlight[]): void {
    this.handled(
      giveBackUncalled(
        { db: this.o.db, owner: this.o.owner, leaseTtlMs: this.o.leaseTtlMs, log: this.o.log, stopping: () => this.stopping },
        fs.map((f) => ({ id: f.job.id, gen: f.gen })),
      ),
    );
  }

  /** Jobs whose due instant has come: in line for a call slot. */
  private async opened(fs: InFlight[]): Promise<void> {
    for (const f of fs) this.ready.push(f);
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
      const room = this.o.concurrency + this.armAhead() - this.inCall.size - this.starting - this.armed.length;
      // While armed jobs fill the slots that free, a check waits for room for half a batch:
      // started for the one slot free at that moment, it held the line for a round trip while
      // every other slot freed (checks went 1, 63, 1, 63 jobs). With nothing armed or in
      // flight, any room is used at once.
      const minBatch = this.armed.length > 0 || this.inCall.size > 0 ? Math.ceil(this.o.concurrency / 2) : 1;
      if (room <= 0 || this.ready.length === 0 || this.stopping) return;
      if (this.armAhead() > 0 && room < Math.min(minBatch, this.ready.length)) return;
      const batch = this.takeReady(room);
      if (batch.length === 0) return;
      this.starting += batch.length;
      try {
        await this.admit(batch);
      } catch (err) {
        // Each job of the batch is accounted for (called, given back or left to its lease).
        this.o.log.error(
          { err, jobs: batch.length },
          "starting claimed jobs failed; those not given back at once wait for their leases to lapse, then are retried",
        );
      } finally {
        this.starting -= batch.length;
      }
      this.noteRoom();
    }
  }

  /** Up to `room` jobs from the line, in order; with reserved slots, those below their class only into the others. */
  private takeReady(room: number): InFlight[] {
    const rs = this.o.reservedSlots;
    if (!rs) return this.ready.splice(0, room);
    let lowRoom = this.o.concurrency - rs.slots - this.starting;
    for (const id of this.inCall) if ((this.inflight.get(id)?.job.priority ?? 0) < rs.minPriority) lowRoom--;
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

  /**
   * Checked jobs kept armed beyond the free call slots while calls are short (ARM_MAX_CALL_MS):
   * as many as the slots call during one pre-call check, at least one per slot, at most
   * ARM_MAX_FACTOR per slot. Each check then carries the next slots' jobs while the current
   * calls run, and a slot that frees is used at once, not after a round trip; an armed job
   * waits for its slot about one check's round trip. With slower calls nothing is armed
   * ahead, so an attempt is never opened long before its call.
   */
  private armAhead(): number {
    // Reserved slots are counted over calls: an armed job of the ordinary class would take
    // the next free slot whatever its class, so with them nothing is armed ahead.
    if (this.o.reservedSlots || this.callMs === undefined || this.callMs > ARM_MAX_CALL_MS) return 0;
    // What the slots call while one check is under way (Little's law): a check that takes as
    // long as ten calls must bring ten slots' worth, or the slots wait for it.
    const perCheck = Math.ceil((this.o.concurrency * (this.checkMs ?? 0)) / Math.max(1, this.callMs));
    return Math.min(ARM_MAX_FACTOR * this.o.concurrency, Math.max(this.o.concurrency, perCheck));
  }

  /** Calls armed jobs while call slots are free; one whose cancel or lease loss came meanwhile is given back uncalled. */
  private launchArmed(): void {
    const gone: InFlight[] = [];
    // A stopping worker calls what it checked: the grace period covers it like any call.
    while (this.armed.length > 0 && (this.inCall.size < this.o.concurrency || this.stopping)) {
      const a = this.armed.shift()!;
      if (a.f.abort.signal.aborted) gone.push(a.f);
      else this.launch(a.f, a.attemptId, a.number, a.catchup);
    }
    if (gone.length === 0) return;
    for (const f of gone) {
      this.limiter.forget(f.job.id);
      this.inflight.delete(f.job.id);
    }
    this.giveBackUncalled(gone);
  }

  /** Jobs the worker keeps claimed beyond its calls: what it calls in PREFETCH_HORIZON_MS. */
  private prefetchTarget(): number {
    const max = this.o.prefetch ?? 0;
    return Math.min(max, Math.max(this.o.concurrency, Math.ceil((this.callRate * PREFETCH_HORIZON_MS) / 1000)));
  }

  /** Room for half of what the worker may hold: the dispatcher in this process claims a batch. */
  private noteRoom(): void {
    if (this.stopping) return;
    if (!this.wantsMore()) return;
    this.o.onRoom?.();
    // The queue is looked at again now only if the last look left work there (or nothing in
    // this process feeds the worker); else NOTIFY and the poll interval bring it.
    if (this.queueBacklog || !this.o.onRoom) this.sleeper.wake();
  }

  /** Whether a claim for this worker would be a batch worth its statement (or the worker is idle). */
  wantsMore(): boolean {
    if (this.stopping) return false;
    // Claims that start their jobs come when half a batch of slots can start (as the pump's
    // checks do), not to fill a prefetch: what they bring is called at once.
    if (this.claimsOnlyWhatStarts() && this.inflight.size > 0) return this.startRoom() >= Math.ceil(this.o.concurrency / 2);
    const capacity = this.o.concurrency + this.prefetchTarget();
    // The reserved class must not wait for a batch's worth of room: its slots are few.
    if (this.o.reservedSlots && this.slots.room() > 0) return true;
    return this.slots.free() * 2 >= capacity || this.inflight.size === 0;
  }

  /** Ask each job's host for room, then the pre-call check and the call. */
  private async admit(fs: InFlight[]): Promise<void> {
    // Cancelled or lease lost while waiting for the instant or a slot: not called.
    const gone = fs.filter((f) => f.abort.signal.aborted);
    if (gone.length > 0) await this.returnHeld(gone);
    const claimed = fs.filter((f) => !f.abort.signal.aborted).map((f) => f.job);
    if (claimed.length === 0) return;
    try {
      const now = Date.now();
      const deferred: { id: string; gen: number; delayMs: number }[] = [];
      const ready: InFlight[] = [];
      for (const job of claimed) {
        const f = this.inflight.get(job.id);
        if (!f) continue;
        const a = this.limiter.admit(laneKey(job.target.url, job.tenant, job.host_limits), job.id, this.limiter.limitsOf(job.host_limits), f, now);
        if (a.kind === "go") {
          ready.push(f);
          continue;
        }
        this.o.metrics.hostDeferrals.inc();
        if (a.kind === "hold") this.held.add(job.id);
        else deferred.push({ id: job.id, gen: f.gen, delayMs: a.at - now });
      }
      // Neither group waits out its leases because the other's statement failed: the jobs
      // cleared to go start first, and the others are handed back whatever happened to them.
      try {
        await this.begin(ready);
      } finally {
        if (deferred.length > 0) {
          await deferJobs(this.o.db, this.o.owner, deferred);
          for (const d of deferred) this.inflight.delete(d.id);
          this.o.log.debug({ jobs: deferred.length }, "target hosts at their limit: jobs handed back, due again shortly");
        }
      }
    } catch (err) {
      // Jobs claimed but never started stay leased until the reaper returns them.
      for (const job of claimed) {
        if (this.isCalling(job.id) || this.held.has(job.id)) continue;
        this.limiter.forget(job.id);
        this.inflight.delete(job.id);
      }
      throw err;
    } finally {
      if (this.held.size > 0) this.held.arm();
    }
  }

  /** The pre-call check for jobs whose host slot is reserved, then one call per job that passes it. */
  private async begin(ready: InFlight[]): Promise<void> {
    // Verify before retry: a job whose last call may have been delivered asks its target first.
    ready = this.verifier.divert(ready);
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
      this.checkMs = this.checkMs === undefined ? ms : this.checkMs * 0.8 + ms * 0.2;
      await this.o.afterStartAttempts?.(started.map((s) => s.job_id));
    } catch (err) {
      // No answer: the check may have committed and opened attempts, or not. Nothing is
      // called (its outcome could not be recorded against an attempt we do not know), and
      // everything is given back at once, not left for the reaper, which would count an
      // opened attempt as a lost call: a max_attempts 1 job would die uncalled.
      for (const f of ready) {
        this.limiter.forget(f.job.id);
        this.inflight.delete(f.job.id);
      }
      this.giveBackUncalled(ready);
      throw err;
    }
    // Opened attempts are called (or armed for the next free slot) before anything else can fail.
    for (const s of started) {
      const f = this.inflight.get(s.job_id);
      if (!f) continue;
      // The check extended the lease: the watchdog counts from it.
      f.leaseAt = Math.max(f.leaseAt, sentAt);
      this.armed.push({ f, attemptId: s.attempt_id, number: s.number, catchup: s.catchup });
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
          this.inflight.delete(f.job.id);
          const r = released.find((x) => x.id === f.job.id);
          this.o.log.info({ job_id: f.job.id, status: r?.status ?? "reclaimed" }, "dispatch is stale (cancelled or changed since the claim); not calling");
        }
      }
    } catch (err) {
      for (const f of ready) {
        if (this.isCalling(f.job.id)) continue;
        this.limiter.forget(f.job.id);
        this.inflight.delete(f.job.id);
      }
      throw err;
    }
  }

  private giveBackVerified(fs: InFlight[]): Promise<void> {
    for (const f of fs) this.limiter.forget(f.job.id);
    return this.returnHeld(fs);
  }

  /** Held jobs not called after all (a cancel, a lost lease, a stop): back to the database at once. */
  private async returnHeld(fs: InFlight[]): Promise<void> {
    for (const f of fs) this.held.delete(f.job.id);
    try {
      await releaseJobs(
        this.o.db,
        this.o.owner,
        fs.map((f) => ({ id: f.job.id, gen: f.gen })),
      );
    } finally {
      for (const f of fs) this.inflight.delete(f.job.id);
    }
  }

  /** Smooths the call rate over ~1 s windows (it sizes the prefetch). */
  private countCall(): void {
    this.rateCount++;
    const now = performance.now();
    const dt = now - this.rateAt;
    if (dt < 200) return;
    const rate = (this.rateCount * 1000) / dt;
    this.callRate = this.callRate === 0 ? rate : this.callRate * 0.7 + rate * 0.3;
    this.rateCount = 0;
    this.rateAt = now;
  }

  /** Launched and not yet recorded (the call, then its outcome's write). */
  private readonly calling = new Set<string>();
  /** Calls that ended, their outcomes not written yet. */
  private recording = 0;
  /** Calls to targets in flight: what WORKER_CONCURRENCY bounds. */
  private readonly inCall = new Set<string>();
  private isCalling(id: string): boolean {
    return this.calling.has(id);
  }

  private launch(f: InFlight, attemptId: string, number: number, catchup: boolean): void {
    const id = f.job.id;
    this.calling.add(id);
    this.inCall.add(id);
    this.o.metrics.inflight.set(this.inCall.size);
    // The call slot is free once the target has answered, not once the outcome is written:
    // the write is batched with others, and a slot held through it would make every call
    // wait for a commit. The job stays in `inflight` (its lease renewed) until it is written,
    // and the claim room counts it, so unwritten outcomes cannot pile up unbounded.
    const launchedAt = performance.now();
    const called = () => {
      if (!this.inCall.delete(id)) return;
      this.recording++;
      const ms = performance.now() - launchedAt;
      this.callMs = this.callMs === undefined ? ms : this.callMs * 0.9 + ms * 0.1;
      this.o.metrics.inflight.set(this.inCall.size);
      this.countCall();
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
        this.recording--;
        this.limiter.forget(id);
        this.inflight.delete(id);
        this.calling.delete(id);
        this.calls.delete(p);
        if (this.ready.length > 0) this.handled(this.pump());
        // Even with jobs in line: the pump may start none of them (too little room for a
        // check yet), and the claim room has grown all the same.
        this.noteRoom();
        this.held.kick();
      });
    this.calls.add(p);
  }
}
