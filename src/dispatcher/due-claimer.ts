import type { Db } from "../store/db.ts";
import { type CandidateRow, candidatesByIds, claimDue, claimDueIds, type ClaimParams, sampleDue, tenantsInFlight } from "../store/dispatch-queries.ts";
import type { ShardFence } from "../store/shards.ts";
import type { ClaimRow } from "../store/types.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { releaseStartedAtClaim } from "../store/worker-queries.ts";
import { type IndexKeeper, RECONCILE_LATE_MS } from "../index/index-keeper.ts";
import { DUE_LIST_MAX } from "../index/due-index.ts";
import type { Candidate, DispatchPlanner } from "./dispatch-planner.ts";
import type { DbClock } from "../time/db-clock.ts";

/** Tenants sampled per pass. */
const TENANTS_PER_PASS = 64;
/** Candidates sampled per slot to fill: room for the planner to choose. */
const CANDIDATE_FACTOR = 4;

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
  /** The database's clock: aging measures lateness against due instants on it. */
  clock: DbClock;
}

/**
 * Finds due jobs of the dispatcher's shards and claims the planner's choice among them. With
 * a usable Redis index the candidates come from it and are claimed by id, every condition
 * checked again in SQL; a SQL reconciliation pass runs every reconcile interval, ahead of
 * the index's candidates, for due jobs the index missed. Without one (none configured, Redis down, not yet rebuilt),
 * discovery is a bounded SQL sample.
 */
export class DueClaimer {
  /** Where the next pass's tenant sample starts (name order). */
  private tenantCursor = "";
  /** The last claim left due work behind for quotas or rates. */
  held = false;

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
    if (!keeper?.usable) return this.claimPlanned(p, await this.sqlCandidates(p.limit, p.fence), into);
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
    if (fromIndex === null) return this.claimPlanned(rest, await this.sqlCandidates(rest.limit, p.fence), into);
    const start = into.length;
    await this.claimPlanned(rest, await candidatesByIds(this.o.db, fromIndex.map((c) => c.jobId), this.o.prestageMs, shards), into);
    // Reconciled entries leave the index as claimed ones do (not read again as stale).
    await keeper.settle(fromIndex, [...reconciled, ...into.slice(start)]);
  }

  /**
   * A bounded sample of due work from SQL: the oldest claimable jobs of each tenant and
   * priority class, for up to TENANTS_PER_PASS tenants, starting after the last pass's (so
   * with more tenants than that, every tenant comes round).
   */
  private async sqlCandidates(limit: number, fence: ShardFence): Promise<CandidateRow[]> {
    const sample = await sampleDue(this.o.db, {
      cursor: this.tenantCursor, tenants: TENANTS_PER_PASS, budget: CANDIDATE_FACTOR * limit, limit, horizonMs: this.o.prestageMs, shards: shardsOf(fence),
    });
    this.tenantCursor = sample.sampled >= TENANTS_PER_PASS ? sample.lastTenant! : "";
    return sample.candidates;
  }

  /** Lets the planner choose among the candidates, then claims its choice by id (fenced, re-checked). */
  private async claimPlanned(p: ClaimParams, rows: CandidateRow[], into: ClaimRow[]): Promise<void> {
    this.held = false;
    if (p.minPriority !== undefined) rows = rows.filter((r) => r.priority >= p.minPriority!);
    if (rows.length === 0) return;
    const candidates: Candidate[] = rows.map((r) => ({ id: r.id, tenant: r.tenant, priority: r.priority, dueMs: r.due_at.getTime(), catchup: r.catchup }));
    const planner = this.o.planner;
    const inFlight = planner.hasTenantRunningQuota ? await tenantsInFlight(this.o.db, [...new Set(rows.map((r) => r.tenant))]) : new Map<string, number>();
    const plan = planner.plan({ candidates, limit: p.limit, nowMs: this.o.clock.now(), inFlight });
    // Due work the quotas or rates held back: the pass must not read as idle.
    this.held = plan.length < Math.min(p.limit, candidates.length);
    if (plan.length === 0) return;
    const ids = plan.map((c) => c.id);
    const attemptIds = p.worker && (p.startLimit ?? 0) > 0 ? ids.map(() => Bun.randomUUIDv7()) : undefined;
    let got: ClaimRow[];
    try {
      got = await claimDueIds(this.o.db, { ...p, ids, attemptIds });
      await this.o.afterClaimReply?.(got);
    } catch (err) {
      // No answer: the claim may have committed and started jobs no one will call.
      if (attemptIds) {
        await releaseStartedAtClaim(this.o.db, p.worker!, ids, attemptIds).then(
          (rows) => rows.length > 0 && this.o.log.warn({ jobs: rows.length }, "a claim that started jobs got no answer: they are given back uncalled, without a try"),
          (e: unknown) => this.o.log.error({ err: e }, "giving back the jobs of a claim that got no answer failed; their leases will lapse and each counts a lost call"),
        );
      }
      throw err;
    }
    into.push(...got);
    planner.commit(got);
    await this.o.afterClaim?.(got);
  }
}

const shardsOf = (f: ShardFence) => ({ list: f.shards.map((h) => h.shard), count: f.count });
