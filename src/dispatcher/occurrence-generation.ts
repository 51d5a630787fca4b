import type { Db } from "../store/db.ts";
import type { ShardFence, ShardSet } from "../store/shards.ts";
import { nextFireAt } from "../store/schedules.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import type { DbClock } from "../time/db-clock.ts";
import { ScheduleGenerator } from "./schedule-generator.ts";

/** Schedules per generation transaction. */
export const SCHEDULE_BATCH = 100;
/**
 * Schedules per generation transaction after a full pass: a herd of schedules due at one
 * instant. A pass of 500 costs the database less than half as much a schedule as passes of
 * 100 (37–44 against 99–105 µs; bench/README part 24); the first pass stays small, so that a
 * few due schedules hold their locks briefly.
 */
export const SCHEDULE_BACKLOG_BATCH = 500;
/** The first wait after a failed generation pass; it doubles while passes keep failing. */
const RETRY_MIN_MS = 100;
/**
 * The wait after a pass whose schedules a transient error put off (a deadlock, a lock
 * timeout): short and fixed, because such errors pass and the occurrences are due now. The
 * chaos suite's generation errors (a pass fails ~60 % of the time) must leave creation within
 * 1.5 s; waits doubling from 100 ms made it 1.8–2.2 s late in 3 of 4 rounds. Without a wait,
 * the pass came back every ~10 ms with a warning line each while the error lasted.
 */
const PUT_OFF_MS = 50;

export interface OccurrenceGenerationOptions {
  db: Db;
  /** The database's clock as last measured: due instants are on it. */
  clock: DbClock;
  pollIntervalMs: number;
  catchupPerSecond: number;
  /** Occurrences are made this far ahead of their instant (SCHEDULER_OCCURRENCE_LEAD; 0: at it). */
  leadMs: number;
  /** The shards this dispatcher holds now (of `count`): the gate reads their schedules only. */
  shards: () => ShardSet;
  log: Logger;
  metrics: Metrics;
}

/**
 * A dispatcher's occurrence generation: when a pass is worth running (the earliest fire time
 * seen, a wait after a failure), how many schedules it takes, and whether more are due at
 * once. The dispatcher runs a pass before each claim.
 */
export class OccurrenceGeneration {
  readonly generator: ScheduleGenerator;
  /** Earliest next_fire_at seen (epoch ms, database clock); passes run only from it. */
  private dueAt = -Infinity;
  /**
   * performance.now() − the database's clock, from the last read of the next fire: the gate
   * opens at dueAt + this on the process's monotonic clock. Taken from the database's own now()
   * in the read's answer against when the read was sent, it errs early by the request's way
   * there, never late; neither the process clock's offset nor a step of its wall clock enters
   * (the two clocks' rates differ by ~1 ms at most over the poll interval between reads). The
   * gate used to open skewMs + 50 (2.05 s by default) before dueAt on the process's estimate of
   * the database clock: a dispatcher busy with a burst ran a generation transaction (five
   * statements) before nearly every claim while any schedule fired within 2 s (bench/README
   * part 28). Until the first read, from that estimate.
   */
  private monoMinusDb: number;
  /** The last pass was full: more schedules are due now. */
  private backlog = false;
  /**
   * After a pass that failed or put schedules off, none before this (performance.now()). A
   * failed pass (its transaction lost) waits from RETRY_MIN_MS, doubling to the poll interval
   * while passes keep failing; one that put schedules off waits PUT_OFF_MS. With a schedule
   * due, a failing pass was tried again every ~10 ms, a log line each (~100 a second) for as
   * long as the fault lasted.
   */
  private retryAt = 0;
  /** The last failed pass's wait (0 after a pass that did not fail). */
  private retryMs = 0;
  /** The earliest instant noted (noteDue) since the running read of the next fire began (see readNextFire). */
  private notedDuringRead = Infinity;
  /** When the next fire was last read (performance.now()). */
  private readAt = -Infinity;
  /** When the last pass that ran began (database clock, as last measured; epoch ms). */
  private passFrom = -Infinity;

  constructor(private readonly o: OccurrenceGenerationOptions) {
    this.monoMinusDb = performance.now() - o.clock.now();
    this.generator = new ScheduleGenerator({
      db: o.db,
      batch: SCHEDULE_BATCH,
      catchupPerSecond: o.catchupPerSecond,
      leadMs: o.leadMs,
      log: o.log,
      metrics: o.metrics,
    });
  }

  /**
   * More schedules are due now (the last pass was full): the next pass should come at once,
   * whatever the claim found. Paced by the dispatcher's waits, a 9:00 herd of schedules was
   * made at ~2,800 a second while a worker busy with its first occurrences stayed full
   * (bench/README part 24).
   */
  get moreDue(): boolean {
    return this.backlog;
  }

  /** A schedule is due at `atMs` (a NOTIFY of a new or changed one): its occurrence may be made from its lead before. */
  noteDue(atMs: number): void {
    this.dueAt = Math.min(this.dueAt, atMs - this.o.leadMs);
    this.notedDuringRead = Math.min(this.notedDuringRead, atMs - this.o.leadMs);
  }

  /** Anything may be due (a NOTIFY that names no instant, or ones lost while unsubscribed): the next pass looks. */
  lookNow(): void {
    this.noteDue(-Infinity);
  }

  /**
   * Reads the earliest fire time (NextFireAt) into the gate, unless it was read at or after
   * `unlessReadSince` (performance.now(); a pass's generation just read it: the NOTIFYs since
   * keep the gate). A schedule's NOTIFY that arrives while the read runs may be about a commit
   * its snapshot missed: kept, not overwritten by the answer (the gate stayed shut past that
   * schedule's instant until the next read).
   *
   * When the schedules read first are all other shards' and due already (their holder dead
   * until its leases lapse, or behind), this one's next is read again from when its last pass
   * began: its own due before then that pass made, or found locked (the gate opens a poll
   * interval on for those). Taking the others' as its own kept the gate open, a generation
   * transaction on every pass, every 5 ms when idle.
   */
  async readNextFire(unlessReadSince = Infinity): Promise<void> {
    if (this.readAt >= unlessReadSince) return;
    this.notedDuringRead = Infinity;
    const shards = this.o.shards();
    const sentAt = performance.now();
    const fire = await nextFireAt(this.o.db, this.o.leadMs, shards);
    const dbNow = fire.dbNow.getTime();
    this.monoMinusDb = sentAt - dbNow;
    let next = (fire.at ?? fire.notBefore)?.getTime() ?? Infinity;
    // No pass yet: the gate opens, and the pass tells from when to read.
    if (fire.notBefore && fire.notBefore.getTime() <= dbNow && Number.isFinite(this.passFrom)) {
      const own = await nextFireAt(this.o.db, this.o.leadMs, shards, new Date(this.passFrom));
      // Open a poll interval after that pass all the same: one of its own that was locked when
      // the pass ran is due from before it, and no read from it would find it again while the
      // others' stay due. From the pass, not from now: each idle pass reads again.
      next = Math.min((own.at ?? own.notBefore)?.getTime() ?? Infinity, this.passFrom + this.o.pollIntervalMs);
    }
    this.dueAt = Math.min(next, this.notedDuringRead);
    this.readAt = performance.now();
  }

  /**
   * The gate's timer fallback while the dispatcher is busy: it reads the next fire on its idle
   * path only, and between reads trusts the schedules' NOTIFYs. One missed (a dispatcher
   * subscribed again, a creation by an older version during a rolling deploy) kept the gate
   * shut for as long as the dispatcher stayed busy: a burst of one-off jobs could hold back a
   * schedule's occurrence until it drained. Read again once a poll interval has passed.
   */
  async refreshIfStale(): Promise<void> {
    try {
      await this.readNextFire(performance.now() - this.o.pollIntervalMs);
    } catch (err) {
      // Claims go on (the gate keeps what it had); tried again a poll interval later.
      this.readAt = performance.now();
      this.o.log.warn({ err }, "reading the next schedule fire failed; the claim goes on, the read is tried again");
    }
  }

  /** How long until a pass has work, by the database's clock (≤ 0: now). */
  msUntilDue(dbNowMs: number): number {
    // A schedule due while generation waits out a failure is not due before the retry.
    return Math.max(this.dueAt - dbNowMs, this.retryAt - performance.now());
  }

  /** One pass if one is due; its errors are logged and retried, never thrown (claims go on). */
  async runIfDue(fence: ShardFence): Promise<void> {
    // The database's clock decides what is due (DueSchedules asks its now()); this gate only
    // saves the question before then (see monoMinusDb): a process clock that is off makes it
    // neither skip a due schedule nor wait for its own idea of the time.
    if (performance.now() < this.dueAt + this.monoMinusDb) return;
    if (performance.now() < this.retryAt) return;
    try {
      const batch = this.backlog ? SCHEDULE_BACKLOG_BATCH : SCHEDULE_BATCH;
      const startedAt = this.o.clock.now();
      const n = await this.generator.runOnce(fence, batch);
      this.passFrom = startedAt;
      // Schedules put off by a transient error (the generator logged which) are still due:
      // the next pass waits a little, or it would come at once.
      const putOff = this.generator.lastPassPutOff;
      this.backlog = n === batch && !putOff;
      // Nothing more due now: the gate stays shut until the next fire time (a new or changed
      // schedule lowers it through its NOTIFY). Left open, a pass that claims for a busy
      // worker and so never reaches the dispatcher's idle path would run a generation
      // transaction every time.
      if (n < batch) await this.readNextFire();
      this.retryMs = 0;
      if (putOff) this.retryAt = performance.now() + PUT_OFF_MS;
    } catch (err) {
      // Schedules must not hold back one-off jobs: claims go on, generation is retried.
      this.backlog = false;
      this.retryMs = Math.min(this.o.pollIntervalMs, Math.max(RETRY_MIN_MS, 2 * this.retryMs));
      this.retryAt = performance.now() + this.retryMs;
      this.o.log.error({ err, retry_in_ms: this.retryMs }, "occurrence generation failed; retrying");
    }
  }
}
