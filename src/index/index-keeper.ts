/**
 * The index keeper: everything the dispatch leader does to keep a Redis due index useful and
 * to never depend on it.
 *
 * While this process leads it turns on capture of index changes (migration 004), runs the
 * outbox relay, and every pass of its own loop checks the built marker and moves the window
 * forward (WindowLoader; the first pass after gaining leadership rebuilds from SQL). Both
 * the relay and the window loader judge the window's edge by this process's clock, which is
 * why they run together here.
 *
 * The dispatcher asks it for candidates. Any failure of Redis marks the index down: the
 * dispatcher then discovers due work from SQL (logged once, `scheduler_index_fallback` = 1)
 * until a pass of the loop reaches Redis again, and if Redis lost its data (no marker) the
 * pass rebuilds it before the index is used again.
 */
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import type { Db } from "../store/db.ts";
import { indexValidate } from "../store/index-queries.ts";
import type { LeaseHold } from "../store/leases.ts";
import type { ClaimedJob } from "../store/types.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import { indexCaptureEnabled, setIndexCapture } from "./capture.ts";
import type { DueChange, DueEntry, DueIndex } from "./due-index.ts";
import { withTimeout } from "../time/with-timeout.ts";
import { OutboxRelay } from "./outbox-relay.ts";
import { WindowLoader } from "./window-loader.ts";
import { DbClock } from "../time/db-clock.ts";

export interface IndexKeeperOptions {
  db: Db;
  index: DueIndex;
  windowMs: number;
  /**
   * The SQL reconciliation pass runs this often while the index is used, whether or not the
   * index's candidates fill the pass (see reconcileBoundMs).
   */
  reconcileMs: number;
  log: Logger;
  metrics: Metrics;
  /** Pause between passes of the keeper's loop (marker check, window move); default 1000 ms. */
  intervalMs?: number;
  /** Rows per relay pass and per load page. */
  batch?: number;
  /** A dispatcher call to Redis that takes longer fails (the index is marked down); default 1000 ms. */
  opTimeoutMs?: number;
  /** The relay added entries, the earliest due at this instant: the dispatcher may look. */
  onDue?: (atMs: number) => void;
  /** The database's clock, which the index's scores are on (absent: the process clock). */
  clock?: DbClock;
  /** Test seam: runs in settle() between its SQL read and its index write, to force races there. */
  beforeSettleWrite?: () => Promise<void>;
}

/** A job must be this late before reconciliation claims it: the index had time to hand it out. */
export const RECONCILE_LATE_MS = 500;

/**
 * The bound on how late a due job that the index misses (a lost write, a stale score) is
 * claimed: it is RECONCILE_LATE_MS late, then waits at most one reconcile interval for the
 * next reconciliation, which runs at the start of the first claim after its deadline
 * whatever the index holds, and claims the oldest late jobs first; plus that one dispatcher
 * pass. This holds while fewer than a pass's limit of the dispatcher's jobs are later than
 * the missed one; beyond that the dispatcher is behind anyway and the missed job is claimed
 * among the others in due order. A dispatcher that claims nothing (its queue target full,
 * quotas) holds back every job alike.
 */
export function reconcileBoundMs(reconcileMs: number): number {
  return RECONCILE_LATE_MS + reconcileMs;
}

const TIMED_OUT: unique symbol = Symbol("timed out");

export class IndexKeeper extends PeriodicLoop<void> {
  readonly relay: OutboxRelay;
  readonly loader: WindowLoader;
  private leading = false;
  /** The coordinator lease this process holds while it leads: the relay works under it. */
  private hold: LeaseHold | undefined;
  /** A shard holder that is not the coordinator: it reads the index the coordinator keeps. */
  private reading = false;
  /** Redis answered the last call and the index was built since it last failed. */
  private up = false;
  /** The fallback was announced (log line, gauge): said once per outage. */
  private announcedDown = false;
  private lastReconcile = 0;
  private readonly intervalMs: number;

  private readonly clock: DbClock;

  constructor(private readonly o: IndexKeeperOptions) {
    super("index-keeper", o.log);
    this.clock = o.clock ?? new DbClock();
    if (o.index.kind === "sql") throw new Error("index keeper: the SQL index needs no keeper");
    const batch = o.batch ?? 1000;
    this.intervalMs = o.intervalMs ?? 1000;
    // The window (which jobs the index holds) is measured on the database's clock, like its scores.
    const now = () => this.clock.now();
    this.relay = new OutboxRelay({
      db: o.db,
      index: o.index,
      batch,
      windowMs: o.windowMs,
      log: o.log,
      now,
      fence: () => this.hold,
      onUpserted: (at) => o.onDue?.(at),
    });
    this.loader = new WindowLoader({
      db: o.db,
      index: o.index,
      windowMs: o.windowMs,
      batch,
      intervalMs: this.intervalMs,
      log: o.log,
      now,
      onRebuild: () => o.metrics.indexRebuilds.inc(),
    });
    o.metrics.indexFallback.set(1);
    o.metrics.indexReconcileBound.set(reconcileBoundMs(o.reconcileMs) / 1000);
  }

  get kind(): string {
    return this.o.index.kind;
  }

  /** Whether the dispatcher may take candidates from the index now. */
  get usable(): boolean {
    return (this.leading || this.reading) && this.up;
  }

  /**
   * Called by a dispatcher that holds shards (or holds none any more). Not leading, it only
   * reads: the index is usable while the coordinator keeps it (capture on, built marker
   * present); the SQL reconciliation pass covers what a lagging keeper missed.
   */
  async read(reading: boolean): Promise<void> {
    if (reading === this.reading) return;
    this.reading = reading;
    if (this.leading) return;
    this.up = false;
    if (reading) {
      this.start();
      this.poke();
    } else {
      this.o.metrics.indexFallback.set(1);
      await this.stop();
    }
  }

  /** Called by the dispatcher when it gains (the hold) or loses (undefined) the coordinator lease. */
  async lead(hold: LeaseHold | undefined): Promise<void> {
    const leading = hold !== undefined;
    this.hold = hold;
    if (leading === this.leading) return;
    this.leading = leading;
    if (leading) {
      this.up = false;
      this.loader.forceRebuild();
      this.start();
      this.poke();
    } else {
      this.up = false;
      this.o.metrics.indexFallback.set(1);
      await this.relay.stop();
      if (this.reading) this.poke();
      else await this.stop();
    }
  }

  /** Stops the loops and closes the index's connections. */
  async close(): Promise<void> {
    this.leading = false;
    this.hold = undefined;
    await this.stop();
    await this.relay.stop();
    await this.o.index.close();
  }

  /**
   * One pass: make sure capture is on and the relay runs, then check the marker and move the
   * window (rebuilding when asked to or when Redis lost the index). Success makes the index
   * usable; failure marks it down until a later pass succeeds.
   */
  async runOnce(): Promise<void> {
    if (!this.leading) return this.checkKept();
    try {
      // Before any load: a change committed after this is captured, one committed before it
      // is in the rows the load reads. Capture was off until now (first lead, or a SQL-only
      // leader turned it off meanwhile): changes made while it was off are only in the table,
      // so the index is rebuilt after the switch, whatever the marker says.
      if (await setIndexCapture(this.o.db, true)) {
        this.o.log.info("index capture on: job changes are relayed to the Redis due index");
        this.loader.forceRebuild();
      }
      this.relay.start();
      await this.loader.runOnce();
      if (!this.up) {
        this.up = true;
        this.o.metrics.indexFallback.set(0);
        if (this.announcedDown) this.o.log.info("due index available again: dispatching from the Redis index");
        this.announcedDown = false;
        // Changes written while Redis was away wait in the outbox: send them now.
        this.relay.poke();
      }
    } catch (err) {
      this.markDown("window", err);
    }
  }

  protected nextDelayMs(): number {
    // Down: probe again soon. Up: the window moves and the marker is checked once a second.
    return this.up ? this.intervalMs : Math.min(this.intervalMs, 500);
  }

  /** A reader's pass: the index is usable while the coordinator keeps it. */
  private async checkKept(): Promise<void> {
    if (!this.reading) return;
    try {
      const kept = (await indexCaptureEnabled(this.o.db)) && (await this.timed(() => this.o.index.builtMarkerGet())) !== null;
      if (kept !== this.up) {
        this.up = kept;
        this.o.metrics.indexFallback.set(kept ? 0 : 1);
        this.o.log.info(
          kept
            ? "reading the Redis due index the dispatch coordinator keeps"
            : "the Redis due index is not kept now (no marker or capture off): dispatching from SQL",
        );
      }
    } catch (err) {
      this.markDown("marker", err);
    }
  }

  /** Candidate due jobs of these shards from the index, or null when the dispatcher must use SQL this time. */
  async candidates(limit: number, horizonMs: number, shards: readonly number[]): Promise<DueEntry[] | null> {
    if (!this.usable) return null;
    try {
      // Scores are due instants on the database's clock.
      return await this.timed(() => this.o.index.dueList({ dueBy: this.clock.now() + horizonMs, limit, shards }));
    } catch (err) {
      this.markDown("due_list", err);
      return null;
    }
  }

  /**
   * After a claim of candidates: claimed entries leave the index; of the others, those SQL
   * says are not (or no longer) scheduled are stale and dropped, and those scheduled at
   * another instant are moved. Every change is conditional on the score the entry was listed
   * with: between the SQL read here and the write, the relay may have written a newer state
   * (a claimed job failed and was retried, a job was rescheduled), and that entry must stay.
   * Best effort: a failure here only leaves entries that the next validation drops again.
   */
  async settle(candidates: DueEntry[], claimed: ClaimedJob[]): Promise<void> {
    if (candidates.length === 0) return;
    const taken = new Set(claimed.map((c) => c.id));
    const changes: DueChange[] = [];
    const rest: DueEntry[] = [];
    for (const c of candidates) {
      if (taken.has(c.jobId)) changes.push({ jobId: c.jobId, ifDueMs: c.dueMs, dueMs: null });
      else rest.push(c);
    }
    if (rest.length > 0) {
      const rows = await indexValidate(
        this.o.db,
        rest.map((c) => c.jobId),
      );
      const byId = new Map(rows.map((r) => [r.id, r]));
      const windowEnd = this.clock.now() + this.o.windowMs;
      for (const c of rest) {
        const row = byId.get(c.jobId);
        const due = row?.due_at.getTime();
        if (row?.status !== "scheduled" || due === undefined || !Number.isFinite(due) || due >= windowEnd) {
          changes.push({ jobId: c.jobId, ifDueMs: c.dueMs, dueMs: null });
          this.o.metrics.indexStale.inc();
          this.o.log.debug({ job_id: c.jobId, status: row?.status ?? null }, "stale due-index entry dropped");
        } else if (due !== c.dueMs) {
          changes.push({ jobId: c.jobId, ifDueMs: c.dueMs, dueMs: due });
          this.o.metrics.indexStale.inc();
        }
        // Otherwise still due as listed: locked by another claim, or due by our clock and
        // not yet by the database's. It stays.
      }
    }
    await this.o.beforeSettleWrite?.();
    try {
      if (changes.length > 0) await this.timed(() => this.o.index.entriesCompareAndSet({ changes }));
    } catch (err) {
      this.markDown("settle", err);
    }
  }

  /**
   * Jobs claimed without the index (a tenant's run, claimed from SQL): their entries leave it
   * as a claim of candidates removes them (settle), each only while it keeps the score it was
   * relayed with, its due instant as read back. Best effort, as settle(): an entry left here
   * is dropped as stale when a later pass lists it.
   */
  async forget(claimed: ClaimedJob[]): Promise<void> {
    if (claimed.length === 0 || !this.usable) return;
    try {
      await this.timed(() => this.o.index.entriesCompareAndSet({ changes: claimed.map((c) => ({ jobId: c.id, ifDueMs: c.due_at.getTime(), dueMs: null })) }));
    } catch (err) {
      this.markDown("forget", err);
    }
  }

  /**
   * Whether the dispatcher should run the SQL reconciliation pass now (and note that it did):
   * once every reconcile interval, asked at the start of every claim from the index.
   */
  reconcileNow(): boolean {
    const now = Date.now();
    if (now - this.lastReconcile < this.o.reconcileMs) return false;
    this.lastReconcile = now;
    return true;
  }

  /** Jobs the reconciliation pass claimed: the index missed them. */
  noteReconciled(jobs: ClaimedJob[]): void {
    if (jobs.length === 0) return;
    this.o.metrics.indexReconciled.inc(jobs.length);
    for (const j of jobs) {
      this.o.metrics.indexReconcileLate.observe(Math.max(0, ((j.queued_at ?? new Date()).getTime() - j.due_at.getTime()) / 1000));
      this.o.log.warn({ job_id: j.id, due_at: j.due_at.toISOString() }, "due job was missing from the Redis index; claimed by SQL reconciliation");
    }
  }

  /**
   * A Redis that accepts and never answers must not stall the dispatcher: past the timeout
   * the call counts as failed (it may still complete later, harmlessly).
   */
  private async timed<T>(fn: () => Promise<T>): Promise<T> {
    const ms = this.o.opTimeoutMs ?? 1000;
    const r = await withTimeout<T | typeof TIMED_OUT>(ms, fn, TIMED_OUT);
    if (r === TIMED_OUT) throw new Error(`the due index did not answer within ${ms} ms`);
    return r;
  }

  private markDown(op: string, err: unknown): void {
    this.o.metrics.indexErrors.inc({ op });
    this.up = false;
    this.o.metrics.indexFallback.set(1);
    if (!this.announcedDown) {
      this.announcedDown = true;
      this.o.log.warn({ err, op }, "due index unavailable: dispatching from SQL until Redis answers again");
    }
    this.poke();
  }
}
