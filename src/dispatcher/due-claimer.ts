import type { Db } from "../store/db.ts";
import {
  type CandidateRow,
  candidatesByIds,
  claimDue,
  claimDueIds,
  claimDueRun,
  type ClaimParams,
  type DueSample,
  sampleDue,
  tenantsInFlight,
} from "../store/dispatch-queries.ts";
import type { ShardFence } from "../store/shards.ts";
import type { ClaimRow } from "../store/types.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { releaseStartedAtClaim, releaseStartedAtRun } from "../store/worker-queries.ts";
import { type IndexKeeper, RECONCILE_LATE_MS } from "../index/index-keeper.ts";
import { DUE_LIST_MAX } from "../index/due-index.ts";
import type { Candidate, DispatchPlanner } from "./dispatch-planner.ts";
import type { DbClock } from "../time/db-clock.ts";

/** Tenants sampled per pass. */
const TENANTS_PER_PASS = 64;
/** Candidates sampled per slot to fill: room for the planner to choose. */
const CANDIDATE_FACTOR = 4;
/**
 * How old a discovery may be when a later pass acts on it, ms: a discovery made ahead
 * (lookAhead), or one whose due work was all one tenant's run (see Run). Older, the pass
 * looks again: jobs that became due since, of other tenants or of a higher class, wait at
 * most this long for a look of their own.
 */
export const AHEAD_MAX_AGE_MS = 50;

/**
 * A discovery found nothing for the planner to decide: every candidate one tenant's, of one
 * priority sign, none a catch-up run or a replay, no quota or rate of the tenant's or global,
 * and more due than the claim took. Until the discovery is AHEAD_MAX_AGE_MS old, passes claim
 * that tenant's oldest due jobs of that sign straight away (ClaimDueRun), without a discovery
 * before each claim: what the planner would have chosen, one statement instead of two. A run
 * ends when a claim of it comes back short (drained) or the discovery is too old.
 */
interface Run {
  tenant: string;
  cls: number;
  shards: string;
  at: number;
}

export interface DueClaimerOptions {
  db: Db;
  planner: DispatchPlanner;
  /** A Redis due index; without, discovery is SQL only. */
  index?: IndexKeeper;
  /** Pre-staging horizon (ms): jobs due that soon are claimed too. */
  prestageMs: number;
  metrics: Metrics;
  /**
   * Test seam: runs after each claim statement has committed, before the rest of the pass
   * (index settling, reconciliation); a throw here is such a later step failing.
   */
  afterClaim?: (jobs: ClaimRow[]) => Promise<void>;
  /**
   * Test seam: runs once ClaimDueIds has answered, before its rows are used; a throw here is
   * a reply lost after the commit (the client cannot tell whether it committed).
   */
  afterClaimReply?: (jobs: ClaimRow[]) => Promise<void>;
  /** Logs a failed give-back of a claim whose reply was lost. */
  log: Logger;
  /** How old a discovery made ahead may be when used (ms; AHEAD_MAX_AGE_MS). Tests set it to be independent of the machine's speed. */
  aheadMaxAgeMs?: number;
  /** Test seam: the jobs of each claim of a run (see Run), no discovery before it. */
  onRun?: (ids: string[]) => void;
  /** Test seam: false, no runs (the tests of the discovery made ahead, which a run replaces). */
  runs?: boolean;
  /** Test seam: each SQL discovery a pass uses, its candidates, and whether it was made ahead. */
  onDiscovery?: (ids: string[], ahead: boolean) => void;
  /** The database's clock: aging measures lateness against due instants on it. */
  clock: DbClock;
}

/**
 * Finds due jobs of the dispatcher's shards and claims the planner's choice among them. With
 * a usable Redis index the candidates come from it and are claimed by id, every condition
 * checked again in SQL; a SQL reconciliation pass runs every reconcile interval, ahead of
 * the index's candidates, for due jobs the index missed. Without one (none configured, Redis down, not yet rebuilt),
 * discovery is a bounded SQL sample. Either way, a discovery whose due work is all one
 * tenant's starts a run: passes claim its oldest jobs straight from SQL until that discovery
 * is AHEAD_MAX_AGE_MS old (with the index, their entries are then removed from it).
 */
export class DueClaimer {
  /** Where the next pass's tenant sample starts (name order). */
  private tenantCursor = "";
  /** The last claim left due work behind for quotas or rates. */
  held = false;
  /** The next pass's discovery, started beside this pass's claim (see lookAhead). */
  private ahead: { shards: string; cursor: string; at: number; sample: Promise<DueSample | undefined> } | undefined;
  private run: Run | undefined;

  constructor(private readonly o: DueClaimerOptions) {}

  /**
   * Claims up to p.limit due jobs; observes the dispatch lag of each. Each claim statement's
   * rows are pushed to `into` as soon as it commits: if a later step of the pass throws
   * (index settling, reconciliation), the caller still has every job claimed so far and
   * must hand them on, or they would sit claimed until their lease lapses.
   */
  async claim(p: ClaimParams, into: ClaimRow[] = []): Promise<ClaimRow[]> {
    const t0 = performance.now();
    const start = into.length;
    await this.discoverAndClaim({ ...p, horizonMs: this.o.prestageMs }, into);
    const s = (performance.now() - t0) / 1000;
    for (let i = start; i < into.length; i++) this.o.metrics.dispatchLag.observe(s);
    return into.slice(start);
  }

  private async discoverAndClaim(p: ClaimParams, into: ClaimRow[]): Promise<void> {
    const keeper = this.o.index;
    const shards = shardsOf(p.fence);
    // Not for the reserved class's claims (their candidates are filtered by class). With the
    // index as without: a pass of the index's candidates is a Redis read, three statements
    // (the candidates' rows, the claim, the validation of those not taken) and a Redis write,
    // where a run's is one statement and the write. A 20,000-job burst went at 5,900/s with
    // the index against 9,000 without (bench/README part 28). The run is bounded by its
    // discovery's age (AHEAD_MAX_AGE_MS), so the reconciliation below still runs on time.
    if (p.minPriority === undefined && this.runGoesOn(p.fence)) {
      const got = await this.claimRun(p, this.run!, into);
      if (keeper?.usable) await keeper.forget(got);
      if (got.length >= p.limit) return;
      // The run is drained: the rest of the room goes to a discovery in this same pass.
      const started = got.filter((j) => j.attempt_id !== null).length;
      p = { ...p, limit: p.limit - got.length, startLimit: p.startLimit === undefined ? undefined : Math.max(0, p.startLimit - started) };
    }
    if (!keeper?.usable) {
      const candidates = await this.sqlCandidates(p.limit, p.fence);
      const ids = await this.plan(p, candidates);
      // A full plan means more due work than this claim takes: the next passes claim the
      // tenant's run, or the next pass's discovery can start now.
      if (p.minPriority === undefined && ids.length >= p.limit) {
        this.run = this.runOf(candidates, p.fence);
        if (!this.run) this.lookAhead(p.limit, p.fence, ids);
      }
      return this.claimIds(p, ids, into);
    }
    // The safety net behind the index runs on its own clock, first: an index whose candidates
    // fill every pass must not keep a job it missed waiting (reconcileBoundMs). It claims
    // oldest first, without the planner: these jobs are already late.
    let reconciled: ClaimRow[] = [];
    if (p.minPriority === undefined && keeper.reconcileNow()) {
      reconciled = await claimDue(this.o.db, { ...p, lateMs: RECONCILE_LATE_MS });
      into.push(...reconciled);
      await this.o.afterClaim?.(reconciled);
      keeper.noteReconciled(reconciled);
      if (reconciled.length >= p.limit) return;
    }
    const rest = { ...p, limit: p.limit - reconciled.length };
    // The jobs just reconciled are mostly still in the index, at its head (they are the
    // oldest): without room for them they filled the candidate list of a pass that had
    // reconciled most of its limit, and the rest of the pass claimed nothing.
    const want = rest.limit * CANDIDATE_FACTOR + reconciled.length;
    const fromIndex = await keeper.candidates(Math.min(DUE_LIST_MAX, want), this.o.prestageMs, shards.list);
    if (fromIndex === null) return this.claimIds(rest, await this.plan(rest, await this.sqlCandidates(rest.limit, p.fence)), into);
    const start = into.length;
    const rows = await candidatesByIds(
      this.o.db,
      fromIndex.map((c) => c.jobId),
      this.o.prestageMs,
      shards,
    );
    const ids = await this.plan(rest, rows);
    // As without the index: a full plan of one tenant's work starts a run.
    if (p.minPriority === undefined && ids.length >= rest.limit) this.run = this.runOf(rows, p.fence);
    await this.claimIds(rest, ids, into);
    // Reconciled entries leave the index as claimed ones do (not read again as stale).
    await keeper.settle(fromIndex, [...reconciled, ...into.slice(start)]);
  }

  /**
   * A bounded sample of due work from SQL: the oldest claimable jobs of each tenant and
   * priority class, for up to TENANTS_PER_PASS tenants, starting after the last pass's (so
   * with more tenants than that, every tenant comes round). The one made ahead, beside the
   * last claim, when it still answers this pass's question.
   */
  private async sqlCandidates(limit: number, fence: ShardFence): Promise<CandidateRow[]> {
    const ahead = await this.takeAhead(limit, fence);
    const sample = ahead ?? (await this.sample(limit, fence, []));
    this.o.onDiscovery?.(
      sample.candidates.map((c) => c.id),
      ahead !== undefined,
    );
    this.tenantCursor = sample.sampled >= TENANTS_PER_PASS ? sample.lastTenant! : "";
    return sample.candidates;
  }

  private sample(limit: number, fence: ShardFence, exclude: string[]): Promise<DueSample> {
    return sampleDue(this.o.db, {
      cursor: this.tenantCursor,
      tenants: TENANTS_PER_PASS,
      budget: CANDIDATE_FACTOR * limit,
      limit,
      horizonMs: this.o.prestageMs,
      shards: shardsOf(fence),
      exclude,
    });
  }

  /**
   * Starts the next pass's discovery while this pass's claim runs, leaving out the jobs it
   * claims: passes are a discovery and a claim one after the other, and the worker's slots
   * wait for both (bench/README, issue 15 part 8). Candidates only: the next claim checks
   * every one again, so a job claimed, cancelled or moved meanwhile is never taken by it.
   */
  private lookAhead(limit: number, fence: ShardFence, claiming: string[]): void {
    const sample = this.sample(limit, fence, claiming).catch((err: unknown) => {
      this.o.log.debug({ err }, "discovery ahead of the next pass failed; that pass looks again");
      return undefined;
    });
    this.ahead = { shards: shardKey(fence), cursor: this.tenantCursor, at: performance.now(), sample };
  }

  /**
   * The discovery made ahead, if it answers this pass: the same shards and tenant cursor,
   * young enough, and enough candidates for the limit (asked for a larger one, or found
   * short because the claim in flight took the rest, the pass looks again).
   */
  private async takeAhead(limit: number, fence: ShardFence): Promise<DueSample | undefined> {
    const a = this.ahead;
    this.ahead = undefined;
    if (!a || a.shards !== shardKey(fence) || a.cursor !== this.tenantCursor) return undefined;
    const sample = await a.sample;
    if (!sample || performance.now() - a.at > (this.o.aheadMaxAgeMs ?? AHEAD_MAX_AGE_MS) || sample.candidates.length < limit) return undefined;
    return sample;
  }

  /** The run these candidates (a full discovery, all of it planned) make, if they make one (see Run). */
  private runOf(candidates: CandidateRow[], fence: ShardFence): Run | undefined {
    const first = candidates[0];
    if (!first || this.o.runs === false || !this.o.planner.unlimited(first.tenant)) return undefined;
    const cls = Math.sign(first.priority);
    for (const c of candidates) if (c.catchup || c.tenant !== first.tenant || Math.sign(c.priority) !== cls) return undefined;
    return { tenant: first.tenant, cls, shards: shardKey(fence), at: performance.now() };
  }

  /** Whether this pass claims the run (the same shards, its discovery young enough). */
  private runGoesOn(fence: ShardFence): boolean {
    const r = this.run;
    if (r && r.shards === shardKey(fence) && performance.now() - r.at <= (this.o.aheadMaxAgeMs ?? AHEAD_MAX_AGE_MS)) return true;
    this.run = undefined;
    return false;
  }

  /** A claim of the run's next jobs (started at the claim as claimIds does); a short one ends it. */
  private async claimRun(p: ClaimParams, run: Run, into: ClaimRow[]): Promise<ClaimRow[]> {
    this.held = false;
    const attemptIds = attemptIdsFor(p, p.limit);
    let got: ClaimRow[];
    try {
      got = await claimDueRun(this.o.db, { ...p, tenant: run.tenant, cls: run.cls, attemptIds });
      await this.o.afterClaimReply?.(got);
    } catch (err) {
      this.run = undefined;
      if (attemptIds) await this.giveBackStarted(() => releaseStartedAtRun(this.o.db, p.worker!, p.fence, attemptIds));
      throw err;
    }
    this.o.onRun?.(got.map((j) => j.id));
    if (got.length < p.limit) this.run = undefined;
    await this.taken(got, into);
    return got;
  }

  /** A claim's rows: handed on, counted against the rates, then the test seam. */
  private async taken(got: ClaimRow[], into: ClaimRow[]): Promise<void> {
    into.push(...got);
    this.o.planner.commit(got);
    await this.o.afterClaim?.(got);
  }

  /** No answer: the claim may have committed and started jobs no one will call; they are given back uncalled. */
  private async giveBackStarted(release: () => Promise<unknown[]>): Promise<void> {
    await release().then(
      (rows) =>
        rows.length > 0 && this.o.log.warn({ jobs: rows.length }, "a claim that started jobs got no answer: they are given back uncalled, without a try"),
      (e: unknown) =>
        this.o.log.error({ err: e }, "giving back the jobs of a claim that got no answer failed; their leases will lapse and each counts a lost call"),
    );
  }

  /** Waits for a discovery made ahead that is still running (a stopping dispatcher). */
  async settle(): Promise<void> {
    await this.ahead?.sample;
    this.ahead = undefined;
  }

  /** The planner's choice among the candidates: the ids to claim, in its order. */
  private async plan(p: ClaimParams, rows: CandidateRow[]): Promise<string[]> {
    this.held = false;
    if (p.minPriority !== undefined) rows = rows.filter((r) => r.priority >= p.minPriority!);
    if (rows.length === 0) return [];
    const candidates: Candidate[] = rows.map((r) => ({ id: r.id, tenant: r.tenant, priority: r.priority, dueMs: r.due_at.getTime(), catchup: r.catchup }));
    const planner = this.o.planner;
    const inFlight = planner.hasTenantRunningQuota ? await tenantsInFlight(this.o.db, [...new Set(rows.map((r) => r.tenant))]) : new Map<string, number>();
    const plan = planner.plan({ candidates, limit: p.limit, nowMs: this.o.clock.now(), inFlight });
    // Due work the quotas or rates held back: the pass must not read as idle.
    this.held = plan.length < Math.min(p.limit, candidates.length);
    return plan.map((c) => c.id);
  }

  /** Claims the planned jobs by id (fenced, every condition checked again; started at the claim when p.startLimit says so). */
  private async claimIds(p: ClaimParams, ids: string[], into: ClaimRow[]): Promise<void> {
    if (ids.length === 0) return;
    const attemptIds = attemptIdsFor(p, ids.length);
    let got: ClaimRow[];
    try {
      got = await claimDueIds(this.o.db, { ...p, ids, attemptIds });
      await this.o.afterClaimReply?.(got);
    } catch (err) {
      // No answer: the claim may have committed and started jobs no one will call.
      if (attemptIds) await this.giveBackStarted(() => releaseStartedAtClaim(this.o.db, p.worker!, ids, attemptIds));
      throw err;
    }
    await this.taken(got, into);
  }
}

/** The attempt ids a claim of up to `most` jobs may open (ClaimDueIds, ClaimDueRun: the n-th started gets the n-th); none without a start. */
function attemptIdsFor(p: ClaimParams, most: number): string[] | undefined {
  if (!p.worker || (p.startLimit ?? 0) <= 0) return undefined;
  return Array.from({ length: Math.min(most, p.startLimit!) }, () => Bun.randomUUIDv7());
}

const shardsOf = (f: ShardFence) => ({ list: f.shards.map((h) => h.shard), count: f.count });
/** Which shards a fence holds, as a key (epochs apart: the claim checks those). */
const shardKey = (f: ShardFence) => `${f.count}:${f.shards.map((h) => h.shard).join(",")}`;
