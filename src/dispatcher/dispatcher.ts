import type { Db } from "../store/db.ts";
import { expireDue, expireMisfired } from "../store/dispatch-queries.ts";
import type { LeaseHold } from "../store/leases.ts";
import type { ShardFence, ShardSet } from "../store/shards.ts";
import { ShardOwnership } from "./shard-ownership.ts";
import { SLOTS } from "../store/shards.ts";
import type { ClaimRow } from "../store/types.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { fencingToken } from "../region/fencing.ts";
import type { RegionAuthority } from "../region/authority.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import { LeaderElector } from "./leader-elector.ts";
import { LeaseReaper } from "./lease-reaper.ts";
import { OccurrenceGeneration } from "./occurrence-generation.ts";
import { setIndexCapture } from "../index/capture.ts";
import type { IndexKeeper } from "../index/index-keeper.ts";
import { DispatchPlanner, type PlannerSettings } from "./dispatch-planner.ts";
import { DueClaimer } from "./due-claimer.ts";
import { IdleWait } from "./idle-wait.ts";
import { DispatchClaims } from "./dispatch-claims.ts";
import { DbClock } from "../time/db-clock.ts";
import type { LocalWorker } from "./local-worker.ts";

export interface DispatcherOptions {
  db: Db;
  owner: string;
  batch: number;
  leaderTtlMs: number;
  leaseTtlMs: number;
  skewMs: number;
  pollIntervalMs: number;
  log: Logger;
  metrics: Metrics;
  /** A worker in this process: due jobs go straight to it while it has room. */
  localWorker?: LocalWorker;
  /** Catch-up occurrences released per second at most (misfire recovery). */
  catchupPerSecond: number;
  /** A Redis due index kept by this dispatcher while it leads; without, discovery is SQL only. */
  index?: IndexKeeper;
  /** The region authority: this dispatcher leads and claims only while its region is home. */
  authority: RegionAuthority;
  /** Fair dispatch: class weights, aging, tenant quotas, the global dispatch rate. */
  flow: PlannerSettings;
  /** Called when this process gains or loses the dispatch lease. */
  onLeadership?: (leading: boolean) => void;
  /**
   * Pre-staging: claim jobs this many ms before they are due, so a burst is in workers'
   * hands at its due second. Workers hold each until its due instant; 0: off.
   */
  prestageMs?: number;
  /** Schedules' occurrences are made this far ahead of their instant (SCHEDULER_OCCURRENCE_LEAD; 0: at it). */
  occurrenceLeadMs?: number;
  /** SCHEDULER_SHARDS: the due-time space is cut into this many shards, each held by one dispatcher. */
  shards: number;
  /** Worker slots that serve only jobs of at least minPriority (the workers' setting). */
  reservedSlots?: { slots: number; minPriority: number };
  /** Test seam, see DueClaimerOptions.afterClaim. */
  afterClaim?: (jobs: ClaimRow[]) => Promise<void>;
  /** Test seam, see DueClaimerOptions.afterClaimReply. */
  afterClaimReply?: (jobs: ClaimRow[]) => Promise<void>;
  /** Test seam, see DueClaimerOptions.onRun. */
  onRun?: (ids: string[]) => void;
  /** Test seam, see DueClaimerOptions.aheadMaxAgeMs. */
  aheadMaxAgeMs?: number;
  /** Test seam: the wait after a pass whose claim did not see a job already due (5 ms). */
  notSeenWaitMs?: number;
  /** The database's clock, to plan wake-ups by (absent: the process clock). */
  clock?: DbClock;
}

/** What one claim pass did: `capped`, nothing was claimed (no room, or a full queue); `localFull`, the worker in this process had no room. */
interface ClaimOutcome {
  claimed: number;
  full: boolean;
  capped: boolean;
  localFull?: boolean;
}

export const DISPATCH_LEASE = "dispatch";
/** How soon a dispatcher looks again at a full worker in its process (no statement runs then). */
const LOCAL_FULL_RECHECK_MS = 10;

/**
 * Finds due jobs and queues them for workers, while it holds the dispatch lease. Wakes on
 * NOTIFY (a job inserted or rescheduled: payload = its due instant), on a timer set to the
 * earliest known due time, and at least every poll interval.
 */
export class Dispatcher extends PeriodicLoop<number> {
  /** The coordinator lease ("dispatch"): duties done once per region (reaper, expiry, index, authority renewal). */
  readonly elector: LeaderElector;
  /** The shards this dispatcher claims and generates occurrences for. */
  readonly shards: ShardOwnership;
  readonly reaper: LeaseReaper;
  /** Occurrences of due schedules, made before each claim. */
  readonly generation: OccurrenceGeneration;
  private unlisten: (() => Promise<void>) | undefined;
  private sleepMs = 0;
  readonly planner: DispatchPlanner;
  private readonly claimer: DueClaimer;
  /** How long to sleep after a pass that left no more work at hand. */
  private readonly idle: IdleWait;
  /** The two ways a pass claims: for the worker in this process, or into the queue. */
  private readonly claims: DispatchClaims;
  /** The highest shard epoch this dispatcher held in the current generation: its fencing term. */
  private term = { generation: -1, epoch: 0 };
  /** Each shard's label value, made once: the dispatched counter is tallied per job. */
  private readonly shardLabels: string[] = [];
  private readonly prestageMs: number;
  private readonly clock: DbClock;

  constructor(private readonly o: DispatcherOptions) {
    super("dispatcher", o.log);
    this.prestageMs = o.prestageMs ?? 0;
    this.clock = o.clock ?? new DbClock();
    this.elector = new LeaderElector({
      db: o.db,
      name: DISPATCH_LEASE,
      owner: o.owner,
      ttlMs: o.leaderTtlMs,
      skewMs: o.skewMs,
      log: o.log,
      region: o.authority.region,
      onChange: (hold) => this.onLeadership(hold),
    });
    this.reaper = new LeaseReaper({
      db: o.db,
      batch: o.batch,
      intervalMs: Math.min(5000, Math.max(250, o.leaseTtlMs / 4)),
      skewMs: o.skewMs,
      log: o.log,
      metrics: o.metrics,
      isLeader: () => this.elector.current !== undefined,
      onReaped: () => this.poke(),
    });
    this.planner = new DispatchPlanner(o.flow);
    this.claimer = new DueClaimer({
      db: o.db,
      planner: this.planner,
      index: o.index,
      prestageMs: this.prestageMs,
      metrics: o.metrics,
      afterClaim: o.afterClaim,
      afterClaimReply: o.afterClaimReply,
      onRun: o.onRun,
      aheadMaxAgeMs: o.aheadMaxAgeMs,
      log: o.log,
      clock: this.clock,
    });
    this.claims = new DispatchClaims({ db: o.db, claimer: this.claimer, batch: o.batch, leaseTtlMs: o.leaseTtlMs, reservedSlots: o.reservedSlots });
    this.shards = new ShardOwnership({
      db: o.db,
      owner: o.owner,
      count: o.shards,
      ttlMs: o.leaderTtlMs,
      skewMs: o.skewMs,
      region: o.authority.region,
      log: o.log,
      metrics: o.metrics,
      onChange: (held) => {
        // Shards taken may have schedules due: the generation gate read only those held before.
        if (held.length > 0) this.lookNow();
        o.index?.read(held.length > 0).catch((err: unknown) => o.log.error({ err }, "switching the due index reader failed"));
      },
    });
    this.generation = new OccurrenceGeneration({
      db: o.db,
      clock: this.clock,
      pollIntervalMs: o.pollIntervalMs,
      catchupPerSecond: o.catchupPerSecond,
      leadMs: o.occurrenceLeadMs ?? 0,
      shards: () => this.heldSet(),
      log: o.log,
      metrics: o.metrics,
    });
    this.idle = new IdleWait({
      db: o.db,
      clock: this.clock,
      prestageMs: this.prestageMs,
      pollIntervalMs: o.pollIntervalMs,
      generation: this.generation,
      claimer: this.claimer,
      planner: this.planner,
      index: o.index,
      notSeenWaitMs: o.notSeenWaitMs,
      shards: () => this.heldSet(),
    });
  }

  async begin(): Promise<void> {
    this.unlisten = await this.o.db.listen(
      "scheduler_due",
      (payload) => {
        // "s<ms>": a schedule fires then (NotifyScheduleDue); "<ms>": a job is due then.
        const schedule = payload.startsWith("s");
        const at = Number(schedule ? payload.slice(1) : payload);
        if (!Number.isFinite(at)) this.lookNow();
        else if (schedule) this.noteScheduleDue(at);
        else this.noteJobDue(at);
        // The change's outbox row committed with it: relay it now rather than on the next tick.
        this.o.index?.relay.poke();
      },
      () => this.lookNow(), // (re)subscribed: anything sent meanwhile is gone, so look now
    );
    await this.elector.begin();
    await this.shards.begin();
    this.reaper.start();
    this.start();
  }

  async end(): Promise<void> {
    await this.stop();
    await this.o.index?.lead(undefined);
    await this.reaper.stop();
    await this.shards.stop();
    await this.elector.stop();
    await this.unlisten?.();
  }

  async runOnce(): Promise<number> {
    const held = this.shards.current;
    const auth = this.o.authority.current;
    if (!auth || auth.homeRegion !== this.o.authority.region) {
      this.sleepMs = this.o.pollIntervalMs;
      return 0;
    }
    // Expiry is done once per region, by the coordinator; claims by each shard's holder.
    // Not on every pass: a claim never takes an expired or misfired job (ClaimDue checks
    // both), so the sweeps only record what already cannot run, and once per poll interval
    // keeps them off the delivery path.
    if (this.elector.current && this.clock.now() >= this.nextExpiryAt) {
      this.nextExpiryAt = this.clock.now() + Math.min(this.o.pollIntervalMs, 1000);
      await this.expire();
    }
    if (held.length === 0) {
      this.sleepMs = this.o.pollIntervalMs;
      return 0;
    }
    const fence: ShardFence = { owner: this.o.owner, shards: held, count: this.o.shards, region: auth.homeRegion, generation: auth.generation };
    // Occurrences first: one due now is then claimed in this same pass. A busy dispatcher
    // never reaches the idle path's read of the next fire: the gate is read again each poll
    // interval all the same.
    const passStartedAt = performance.now();
    await this.generation.refreshIfStale();
    await this.generation.runIfDue(fence);
    // Before the claim's statement starts: a job due only after this was not due to it.
    const claimStartedAt = this.clock.now();
    const { claimed, full, capped, localFull } = await this.claim(fence);
    // More schedules due (a herd): the next pass makes them at once, whatever the claim found.
    const moreDue = this.generation.moreDue;
    if (localFull) {
      // The worker in this process has its hands full: it pokes us when it has room for a
      // batch. Its room changes at many points (a call answered, an outcome written, a check
      // done, its prefetch target moved), and a poke missed at one of them cost a whole poll
      // interval (jobs of the lag bench waited ~1 s, p99 920 ms): look again soon, which
      // costs no statement while the worker is still full.
      this.sleepMs = moreDue ? 0 : Math.min(this.o.pollIntervalMs, LOCAL_FULL_RECHECK_MS);
      return 0;
    }
    if (capped) {
      this.sleepMs = moreDue ? 0 : 20;
      return 0;
    }
    if (full || moreDue) {
      this.sleepMs = 0;
      return claimed;
    }
    this.sleepMs = await this.idle.after(passStartedAt, claimStartedAt);
    return claimed;
  }

  /** The shards held now, as the idle reads filter by them. */
  private heldSet(): ShardSet {
    return { list: this.shards.current.map((h) => h.shard), count: this.o.shards };
  }

  /** When the coordinator sweeps expired and misfired jobs next (database clock). */
  private nextExpiryAt = -Infinity;

  /**
   * Whether this process surely holds the coordinator lease now (renewed within its TTL, on
   * this process's monotonic clock): what the duties done once per region (retention, the
   * region authority's renewal, ANALYZE) ask before each pass.
   */
  isLeading(): boolean {
    return this.elector.current !== undefined;
  }

  /** The region authority changed hands or generation: look again now, for the lease and for due work. */
  authorityChanged(): void {
    this.elector.poke();
    this.poke();
  }

  /** Anything may be due now (a NOTIFY without an instant, or a new subscription): a pass now, generation too. */
  private lookNow(): void {
    this.generation.lookNow();
    this.poke();
  }

  /** Called on a NOTIFY (or by the index relay) about a job due at `atMs`: it is claimed this early. */
  noteJobDue(atMs: number): void {
    // Not the generation gate: a job says nothing about schedules. Opened by every job's
    // NOTIFY, it ran a generation transaction (BEGIN, LockShards, DueSchedules, COMMIT and a
    // NextFireAt) for each batch of jobs created, with no schedule due, and held this
    // dispatcher's lease rows locked meanwhile.
    this.sleeper.wakeAt(this.clock.toLocal(atMs - this.prestageMs));
  }

  /** Called on a NOTIFY about a schedule firing at `atMs`: its occurrence is made from the lead before. */
  noteScheduleDue(atMs: number): void {
    this.generation.noteDue(atMs);
    this.sleeper.wakeAt(this.clock.toLocal(atMs - (this.o.occurrenceLeadMs ?? 0)));
  }

  private async expire(): Promise<void> {
    const expired = await expireDue(this.o.db, this.o.batch);
    for (const e of expired) this.o.log.info({ job_id: e.id }, "job expired before it could start");
    const misfired = await expireMisfired(this.o.db, this.o.batch);
    for (const e of misfired) {
      this.o.metrics.occurrences.inc({ result: "misfired" });
      this.o.log.info({ job_id: e.id, schedule_id: e.schedule_id }, "occurrence misfired: not started in time; expired");
    }
  }

  private async claim(fence: ShardFence): Promise<ClaimOutcome> {
    // Every shard's epoch comes from one never-reset sequence, above all epochs handed out
    // before it was taken, so the highest epoch this dispatcher held is above every token an
    // earlier holder of any of its shards could stamp, and it does not go down (as the
    // highest held now would, once a shard is given back): tokens rise in each shard and from
    // each dispatcher. Only this generation's: an epoch kept across a failover means nothing
    // in the next one. The claim itself never stamps a job below the token it already
    // carries, whatever this says (ClaimDue).
    if (this.term.generation !== fence.generation) this.term = { generation: fence.generation, epoch: 0 };
    this.term.epoch = Math.max(this.term.epoch, ...fence.shards.map((h) => h.epoch));
    const token = fencingToken(fence.generation, this.term.epoch);
    // With a worker in this process, due jobs go to it only, straight into running under its
    // lease: `queued` is for workers in other processes, and a job queued here would only be
    // claimed a second time by this same worker.
    const local = this.o.localWorker;
    const r = local ? await this.claims.forLocal(local, fence, token) : await this.claims.forQueue(fence, token);
    if (!r.claimed) return { claimed: 0, full: false, capped: true, localFull: r.localFull };
    for (const c of r.claimed) {
      this.o.metrics.schedulingLag.observe(Math.max(0, (c.queued_at!.getTime() - c.due_at.getTime()) / 1000));
      const shard = Math.floor((c.slot * this.o.shards) / SLOTS);
      this.o.metrics.shardDispatched.tally((this.shardLabels[shard] ??= String(shard)));
    }
    if (r.claimed.length > 0) this.o.log.debug({ count: r.claimed.length, token }, "dispatched due jobs");
    return { claimed: r.claimed.length, full: r.claimed.length === r.limit, capped: false };
  }

  protected nextDelayMs(): number {
    return this.sleepMs;
  }

  /** A discovery started ahead of a pass that will not come: let it finish before the pool closes. */
  protected override async onStop(): Promise<void> {
    await this.claimer.settle();
  }

  private onLeadership(hold: LeaseHold | undefined): void {
    this.o.metrics.authorityEpoch.set(hold ? fencingToken(this.o.authority.current?.generation ?? 0, hold.epoch) : 0);
    this.o.metrics.dispatchLeader.set(hold ? 1 : 0);
    if (hold) this.poke();
    this.o.onLeadership?.(hold !== undefined);
    const keeper = this.o.index;
    const done = keeper
      ? keeper.lead(hold)
      : hold
        ? setIndexCapture(this.o.db, false).then((changed) => {
            if (changed) this.o.log.info("index capture off: no Redis due index is configured for this dispatcher");
          })
        : undefined;
    done?.catch((err: unknown) => this.o.log.error({ err }, "switching the due index on leadership change failed"));
  }
}
