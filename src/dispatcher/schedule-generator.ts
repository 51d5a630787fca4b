import type { Db, Queryable, Tx } from "../store/db.ts";
import { errorCode, isDataError, isDatabaseError } from "../store/db-errors.ts";
import { insertJobsIn, type NewJob } from "../store/jobs.ts";
import { lockShards, type ShardFence } from "../store/shards.ts";
import type { ScheduleRow } from "../store/schedules.ts";
import {
  type Advance,
  activeOccurrences,
  advanceSchedules,
  dueSchedules,
  expireCoalesced,
  type InProgress,
  pauseBrokenSchedule,
  releaseOldestHeld,
  scheduleKey,
} from "../store/occurrence-queries.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { type CronRule, keptRule } from "../time/cron-rule.ts";
import { type Plan as OccurrencePlan, planOccurrences } from "./occurrence-plan.ts";
import { OccurrencePlacer } from "./occurrence-placer.ts";

export interface ScheduleGeneratorOptions {
  db: Db;
  /** Schedules per transaction, unless a pass asks for another number. */
  batch: number;
  /** Catch-up occurrences released per second at most, per tenant (across its schedules). */
  catchupPerSecond: number;
  /**
   * How far ahead of its instant a schedule's next occurrence is made (ms; 0: at its instant).
   * Made ahead, it is a job due at its nominal time like any other (SCHEDULER_OCCURRENCE_LEAD).
   */
  leadMs?: number;
  log: Logger;
  metrics: Metrics;
}

const MAX_SCAN = 5_000;

/**
 * Turns due schedules into occurrence jobs, fenced like claims: the transaction holds a
 * shared lock on the dispatch lease row naming this holder and epoch, so a stale leader
 * generates nothing and a takeover comes only after it committed (ShardAcquire skips a row
 * still locked; a release or a failover waits for it). Each occurrence is unique per
 * (schedule, nominal time) and inserted ON CONFLICT DO NOTHING; next_fire_at advances in
 * the same transaction.
 */
export class ScheduleGenerator {
  private readonly placer: OccurrencePlacer;

  constructor(private readonly o: ScheduleGeneratorOptions) {
    this.placer = new OccurrencePlacer(o.catchupPerSecond);
  }

  /**
   * One pass; returns how many schedules were processed. Throws when the transaction itself
   * is lost (connection gone, fence lock failed): nothing of the pass is committed then, no
   * schedule is paused or advanced, and the next pass does it all again.
   */
  async runOnce(fence: ShardFence, batch = this.o.batch): Promise<number> {
    this.putOff = false;
    try {
      return await this.o.db.tx(async (q) => {
        // Only the schedules of the shards still held, each held to the end of the transaction.
        const shards = await lockShards(q, fence);
        if (shards.length === 0) return 0;
        const due = await dueSchedules(q, batch, shards, fence.count, this.o.leadMs ?? 0);
        // The common case, an on-time occurrence, for the whole pass at once (a 9:00 herd of
        // schedules was ~1.2 ms a schedule one at a time: bench/README.md, issue 15 part 23).
        // A schedule whose plan fails or that must expire coalesced occurrences goes alone.
        const together: Planned[] = [];
        for (const s of due) {
          let plan: OccurrencePlan | undefined;
          try {
            plan = this.plan(s);
          } catch {
            // Planned again alone, which pauses the schedule with the reason.
          }
          if (plan && plan.coalesceBefore === null) together.push({ s, plan, misfired: plan.misfired, ahead: isAhead(s) });
          else await this.generateOne(q, s);
        }
        if (together.length > 0) await this.generateTogether(q, together);
        return due.length;
      });
    } catch (err) {
      this.retried(err, {});
      throw err;
    }
  }

  /**
   * The pass's schedules in a few statements under one savepoint: one look at what each has
   * in progress, one insert of every occurrence, one advance of every schedule. A transient
   * error rolls it all back for the next pass, as it would one schedule's; an error a
   * schedule's own values could cause is looked for one schedule at a time, so that only that
   * schedule is paused.
   */
  private async generateTogether(q: Tx, planned: Planned[]): Promise<void> {
    const pace = this.placer.snapshot();
    let outcomes: Outcome[];
    try {
      outcomes = await q.savepoint((sp) => this.write(sp, planned));
    } catch (err) {
      this.placer.restore(pace);
      if (isDatabaseError(err) && !(await stillUsable(q))) throw err;
      if (!isScheduleFault(err)) {
        this.retried(err, { schedules: planned.length });
        return;
      }
      for (const p of planned) await this.generateOne(q, p.s);
      return;
    }
    for (const o of outcomes) this.account(o);
  }

  /** One schedule under a savepoint: its failure rolls back only its own work. */
  private async generateOne(q: Tx, s: ScheduleRow & { db_now: Date }): Promise<void> {
    let failure: unknown;
    try {
      await q.savepoint((sp) => this.generate(sp, s));
      return;
    } catch (err) {
      // The savepoint could not be rolled back either (the connection is gone): the whole
      // transaction is lost, and runOnce says so.
      if (isDatabaseError(err) && !(await stillUsable(q))) throw err;
      failure = err;
    }
    if (!isScheduleFault(failure)) {
      // A deadlock, lock or statement timeout, serialization failure, ...: a moment's
      // trouble, not the schedule's. It stays as it was and the next pass tries again.
      this.retried(failure, { schedule_id: s.id, tenant: s.tenant });
      return;
    }
    const reason = `generation failed: ${(failure as Error).message}`.slice(0, 500);
    this.o.log.error({ err: failure, schedule_id: s.id, tenant: s.tenant }, "schedule paused: its occurrences could not be generated");
    await pauseBrokenSchedule(q, s.tenant, s.id, reason);
  }

  /**
   * The last pass put some schedules off to a later one: a transient error rolled their
   * write back (they are still due). The dispatcher waits a little before the next pass.
   */
  get lastPassPutOff(): boolean {
    return this.putOff;
  }
  private putOff = false;

  /** Counted once per error: the one that lost a schedule's turn, or the whole pass's. */
  private counted = new WeakSet<object>();
  private retried(err: unknown, where: { schedule_id?: string; tenant?: string; schedules?: number }): void {
    if (typeof err === "object" && err !== null) {
      if (this.counted.has(err)) return;
      this.counted.add(err);
    }
    const code = errorCode(err);
    this.o.metrics.generationRetries.inc({ code });
    // A whole pass lost is logged by its caller.
    if (where.schedule_id || where.schedules) {
      this.putOff = true;
      this.o.log.warn({ err, code, ...where }, "occurrence generation hit a database error; retrying shortly");
    }
  }

  private rule(s: ScheduleRow): CronRule {
    return keptRule({ cron: s.cron, timezone: s.timezone, dst: { gap: s.dst_gap ?? undefined, fold: s.dst_fold ?? undefined } });
  }

  /**
   * What to create now. A schedule picked ahead of its instant (next_fire_at after the
   * database's now) is planned as at that instant: its one on-time occurrence.
   */
  private plan(s: ScheduleRow & { db_now: Date }): OccurrencePlan {
    return planOccurrences({
      rule: this.rule(s),
      nextFireAt: s.next_fire_at!.getTime(),
      nowMs: Math.max(s.db_now.getTime(), s.next_fire_at!.getTime()),
      misfire: s.misfire,
      misfireGraceMs: s.misfire_grace_ms,
      catchupWindowMs: s.catchup_window_ms,
      endAt: s.end_at?.getTime() ?? null,
      maxScan: MAX_SCAN,
    });
  }

  private async generate(q: Queryable, s: ScheduleRow & { db_now: Date }): Promise<void> {
    const plan = this.plan(s);
    let misfired = plan.misfired;
    if (plan.coalesceBefore !== null) {
      misfired += await expireCoalesced(q, s.tenant, s.id, new Date(plan.coalesceBefore));
    }
    const [o] = await this.write(q, [{ s, plan, misfired, ahead: isAhead(s) }]);
    this.account(o!);
  }

  /**
   * What planned schedules create, written: one look at what each has in progress, one insert
   * of every occurrence, one advance of every schedule (one schedule or a whole pass).
   */
  private async write(q: Queryable, planned: Planned[]): Promise<Outcome[]> {
    const watched = planned.filter((p) => p.s.overlap !== "allow").map((p) => p.s);
    const inProgress = watched.length > 0 ? await activeOccurrences(q, watched) : new Map<string, InProgress>();
    const decided: { p: Planned; jobs: NewJob[]; skipped: number[]; declined: boolean }[] = [];
    for (const p of planned) {
      const counts = await this.releaseMissed(q, p.s, inProgress.get(scheduleKey(p.s.tenant, p.s.id)));
      // Ahead of its instant, skip and queue cannot know what will be in progress then: made
      // ahead only when nothing is now (only a manual run or a replay could start before the
      // instant, and each takes the occurrence back). Otherwise the instant decides.
      if (p.ahead && p.s.overlap !== "allow" && (counts.active > 0 || counts.held > 0)) {
        decided.push({ p, jobs: [], skipped: [], declined: true });
        continue;
      }
      decided.push({ p, ...this.decide(p.s, p.plan, p.s.db_now.getTime(), counts), declined: false });
    }
    const jobs = decided.flatMap((d) => d.jobs);
    const inserted = jobs.length > 0 ? await insertJobsIn(q, jobs) : [];
    const createdIds = new Set(inserted.flatMap((r) => (r.kind === "created" ? [r.job.id] : [])));
    const outcomes = decided.map(({ p, jobs, skipped, declined }) => ({
      s: p.s,
      plan: p.plan,
      created: jobs.filter((j) => createdIds.has(j.id)).length,
      skipped: skipped.length,
      skippedNominals: skipped,
      misfired: p.misfired,
      ahead: p.ahead ? (declined ? ("declined" as const) : ("made" as const)) : undefined,
    }));
    await advanceSchedules(q, outcomes.map(advanceOf));
    return outcomes;
  }

  /** What a schedule has in progress; nothing in progress yet one held means its release was missed: released now. */
  private async releaseMissed(q: Queryable, s: ScheduleRow, c: InProgress | undefined): Promise<InProgress> {
    if (s.overlap === "allow" || !c) return { active: 0, held: 0 };
    if (c.active === 0 && c.held > 0) {
      await releaseOldestHeld(q, s.tenant, s.id);
      return { active: 1, held: c.held - 1 };
    }
    return c;
  }

  /** The occurrences to create under the overlap policy, and the nominal times it skips. */
  private decide(s: ScheduleRow, plan: OccurrencePlan, nowMs: number, c: InProgress): { jobs: NewJob[]; skipped: number[] } {
    const active = c.active;
    let held = c.held;
    const jobs: NewJob[] = [];
    const skipped: number[] = [];
    // Overlap is about occurrences already in progress before this pass. Those created
    // together here (a catch-up and the on-time one, or fire_all's backlog) are what the
    // misfire policy asked for; they do not block each other.
    for (const occ of plan.create) {
      if (s.overlap === "allow" || active === 0) {
        jobs.push(this.placer.place(s, occ, nowMs, false));
      } else if (s.overlap === "queue" && held < s.max_queued) {
        jobs.push(this.placer.place(s, occ, nowMs, true));
        held++;
      } else {
        // Logged once written (account): a write a transient error rolls back decides again.
        skipped.push(occ.nominal);
      }
    }
    return { jobs, skipped };
  }

  /** The metrics and log lines of a schedule's pass, once it is written. */
  private account(o: Outcome): void {
    if (o.created) this.o.metrics.occurrences.inc({ result: "generated" }, o.created);
    if (o.skipped) this.o.metrics.occurrences.inc({ result: "skipped_overlap" }, o.skipped);
    for (const nominal of o.skippedNominals)
      this.o.log.info(
        { schedule_id: o.s.id, tenant: o.s.tenant, nominal_time: new Date(nominal).toISOString(), overlap: o.s.overlap },
        "occurrence skipped: the previous one is still in progress",
      );
    if (o.misfired) {
      this.o.metrics.occurrences.inc({ result: "misfired" }, o.misfired);
      this.o.log.info({ schedule_id: o.s.id, tenant: o.s.tenant, misfired: o.misfired, policy: o.s.misfire }, "occurrences misfired");
    }
  }
}

interface Planned {
  s: ScheduleRow & { db_now: Date };
  plan: OccurrencePlan;
  /** The plan's, and the coalesced occurrences expired before the write. */
  misfired: number;
  /** Picked ahead of its instant (SCHEDULER_OCCURRENCE_LEAD). */
  ahead: boolean;
}

/** A schedule's pass: what it created, skipped and found misfired. */
interface Outcome {
  s: ScheduleRow;
  plan: OccurrencePlan;
  created: number;
  skipped: number;
  /** The nominal times skipped, for their log lines. */
  skippedNominals: number[];
  misfired: number;
  /** Ahead of its instant: its occurrence made, or making it declined (the instant decides). */
  ahead?: "made" | "declined";
}

const advanceOf = (o: Outcome): Advance => {
  const nominal = o.s.next_fire_at!.getTime();
  // Declined: the schedule stays as it was, marked so that it is not picked again before its instant.
  if (o.ahead === "declined")
    return { tenant: o.s.tenant, id: o.s.id, nextFireAt: nominal, lastNominal: null, created: 0, skipped: 0, misfired: 0, skipReason: null, checked: nominal };
  return {
    tenant: o.s.tenant,
    id: o.s.id,
    nextFireAt: o.plan.nextFireAt,
    lastNominal: o.plan.lastNominal,
    created: o.created,
    skipped: o.skipped,
    misfired: o.misfired,
    skipReason: o.skipped > 0 ? `overlap=${o.s.overlap}: the previous occurrence was still in progress` : null,
    ...(o.ahead === "made" && o.plan.create.length > 0 ? { staged: nominal } : {}),
  };
};

/** Picked ahead of its instant: its next fire is after the database's now. */
const isAhead = (s: ScheduleRow & { db_now: Date }): boolean => s.next_fire_at!.getTime() > s.db_now.getTime();

/**
 * The schedule's own fault: its rule, zone or plan could not be evaluated (our code threw,
 * not the database), or the database refused the values it produced (a data or constraint
 * error). Those fail again on every pass: pausing keeps them from retrying for ever.
 */
function isScheduleFault(err: unknown): boolean {
  return !isDatabaseError(err) || isDataError(err);
}

/** Whether the transaction survived the failure (its savepoint was rolled back). */
async function stillUsable(q: Queryable): Promise<boolean> {
  try {
    await q.query("SELECT 1");
    return true;
  } catch {
    return false;
  }
}
