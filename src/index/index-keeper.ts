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
import { sql } from "../store/sql.ts";
import type { JobRow } from "../store/types.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import { indexCaptureEnabled, setIndexCapture } from "./capture.ts";
import { type DueEntry, type DueIndex } from "./due-index.ts";
import { withTimeout } from "../time/with-timeout.ts";
import { OutboxRelay } from "./outbox-relay.ts";
import { WindowLoader } from "./window-loader.ts";
import { DbClock } from "../time/db-clock.ts";

export interface IndexKeeperOptions {
  db: Db;
  index: DueIndex;
  windowMs: number;
  /** The SQL reconciliation pass runs at least this often while the index is used. */
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
}

/** A job must be this late before reconciliation claims it: the index had time to hand it out. */
export const RECONCILE_LATE_MS = 500;

const TIMED_OUT: unique symbol = Symbol("timed out");

export class IndexKeeper extends PeriodicLoop<void> {
  readonly relay: OutboxRelay;
  readonly loader: WindowLoader;
  private leading = false;
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
      db: o.db, index: o.index, batch, windowMs: o.windowMs, log: o.log, now,
      onUpserted: (at) => o.onDue?.(at),
    });
    this.loader = new WindowLoader({
      db: o.db, index: o.index, windowMs: o.windowMs, batch, intervalMs: this.intervalMs, log: o.log, now,
      onRebuild: () => o.metrics.indexRebuilds.inc(),
    });
    o.metrics.indexFallback.set(1);
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

  /** Called by the dispatcher when it gains or loses the dispatch lease. */
  async lead(leading: boolean): Promise<void> {
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
      // is in the rows the load reads.
      if (await setIndexCapture(this.o.db, true)) this.o.log.info("index capture on: job changes are relayed to the Redis due index");
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
        this.o.log.info(kept ? "reading the Redis due index the dispatch coordinator keeps" : "the Redis due index is not kept now (no marker or capture off): dispatching from SQL");
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
   * another instant are moved. Best effort: a failure here only leaves entries that the next
   * validation drops again.
   */
  async settle(candidates: DueEntry[], claimed: JobRow[]): Promise<void> {
    if (candidates.length === 0) return;
    const taken = new Set(claimed.map((c) => c.id));
    const rest = candidates.filter((c) => !taken.has(c.jobId));
    const remove = [...taken];
    const move: DueEntry[] = [];
    if (rest.length > 0) {
      const rows = await this.o.db.query<{ id: string; status: string; due_at: Date }>(sql("IndexValidate"), [rest.map((c) => c.jobId)]);
      const byId = new Map(rows.map((r) => [r.id, r]));
      const windowEnd = this.clock.now() + this.o.windowMs;
      for (const c of rest) {
        const row = byId.get(c.jobId);
        const due = row?.due_at.getTime();
        if (!row || row.status !== "scheduled" || due === undefined || !Number.isFinite(due) || due >= windowEnd) {
          remove.push(c.jobId);
          this.o.metrics.indexStale.inc();
          this.o.log.debug({ job_id: c.jobId, status: row?.status ?? null }, "stale due-index entry dropped");
        } else if (due !== c.dueMs) {
          move.push({ jobId: c.jobId, dueMs: due });
          this.o.metrics.indexStale.inc();
        }
        // Otherwise still due as listed: locked by another claim, or due by our clock and
        // not yet by the database's. It stays.
      }
    }
    try {
      if (remove.length > 0) await this.timed(() => this.o.index.entriesRemove({ jobIds: remove }));
      if (move.length > 0) await this.timed(() => this.o.index.entriesUpsert({ entries: move }));
    } catch (err) {
      this.markDown("settle", err);
    }
  }

  /** Whether the dispatcher should run the SQL reconciliation pass now (and note that it did). */
  reconcileNow(): boolean {
    const now = Date.now();
    if (now - this.lastReconcile < this.o.reconcileMs) return false;
    this.lastReconcile = now;
    return true;
  }

  /** Jobs the reconciliation pass claimed: the index missed them. */
  noteReconciled(jobs: JobRow[]): void {
    if (jobs.length === 0) return;
    this.o.metrics.indexReconciled.inc(jobs.length);
    for (const j of jobs) {
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
