import type { Db } from "../store/db.ts";
import { errorCode } from "../store/db-errors.ts";
import { completeAttempts, type Completion } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";

/** Writes of a whole batch before it is split into single rows. */
const BATCH_TRIES = 3;
/** Writes of one row before its job is left to its lease. */
const ROW_TRIES = 3;
/**
 * While outcomes stream in (the last write ended less than LINGER_MS ago), a write waits up to
 * LINGER_MS after the last one for LINGER_BATCH outcomes. A completion statement has a fixed
 * cost (its executor's set-up over the jobs table's indexes and triggers, its commit's flush)
 * of ~1.5 ms of the server's CPU on a slow box: written at once, one after another, a burst's
 * batches held ~80 outcomes; 200 a batch cost ~20 % less a job (bench:statements, bench/README
 * part 31). An outcome that comes after a quiet spell is written at once.
 */
const LINGER_MS = 10;
const LINGER_BATCH = 200;

/** The outcome could not be written: the job's lease will lapse and the reaper retries it. */
export class OutcomeNotRecorded extends Error {
  constructor(
    readonly jobId: string,
    cause: unknown,
  ) {
    super(`the outcome of job ${jobId} could not be recorded: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = "OutcomeNotRecorded";
  }
}

/**
 * Collects finished calls and writes them in one statement per batch. One flush at a time;
 * outcomes that arrive during a flush go into the next, which lingers a little for more while
 * they stream in (LINGER_MS). Each push resolves with whether the job row accepted it (false:
 * a late completion after the lease moved on).
 *
 * No outcome is dropped for another's sake: a batch that cannot be written (a deadlock that
 * keeps coming back, one row the database refuses) is written row by row, and only a row
 * that cannot be written alone is given up, logged with its job id; its job's lease then
 * lapses and the reaper gives it back, so a successful call will be made again.
 */
export class CompletionBatcher {
  private pending: { item: Completion; done: (accepted: boolean) => void; fail: (e: unknown) => void }[] = [];
  private flushing: Promise<void> | undefined;
  /** When the last write ended (performance.now()); -Infinity before the first. */
  private lastEnded = Number.NEGATIVE_INFINITY;
  /** The lingering write's timer (see LINGER_MS). */
  private lingering: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly db: Db,
    private readonly owner: string,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    private readonly maxBatch = 500,
    private readonly linger = { ms: LINGER_MS, batch: LINGER_BATCH },
  ) {}

  push(item: Completion): Promise<boolean> {
    return new Promise((done, fail) => {
      this.pending.push({ item, done, fail });
      this.kick();
    });
  }

  /** Writes everything pending now (no lingering), and what comes meanwhile. */
  async drain(): Promise<void> {
    while (this.flushing || this.pending.length > 0) {
      this.kick(true);
      await this.flushing;
    }
  }

  private kick(now = false): void {
    if (this.flushing || this.pending.length === 0) return;
    if (!now && this.pending.length < this.linger.batch) {
      const wait = this.lastEnded + this.linger.ms - performance.now();
      if (wait > 0) {
        this.lingering ??= setTimeout(() => {
          this.lingering = undefined;
          this.kick(true);
        }, wait);
        return;
      }
    }
    if (this.lingering) {
      clearTimeout(this.lingering);
      this.lingering = undefined;
    }
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined;
      this.lastEnded = performance.now();
      this.kick();
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, this.maxBatch);
    const whole = await this.write(
      batch.map((b) => b.item),
      BATCH_TRIES,
      100,
    );
    if (whole.ok) {
      const accepted = new Set(whole.rows.map((r) => r.id));
      for (const b of batch) b.done(accepted.has(b.item.job_id));
      return;
    }
    this.log.warn({ err: whole.err, code: errorCode(whole.err), count: batch.length }, "writing a batch of outcomes failed; writing them one by one");
    for (const b of batch) {
      const one = await this.write([b.item], ROW_TRIES, 20);
      if (one.ok) {
        b.done(one.rows.length > 0);
        continue;
      }
      const { job_id, attempt_id, outcome, http_status, next_status } = b.item;
      this.metrics?.outcomesUnrecorded.inc({ outcome });
      this.log.error(
        { err: one.err, code: errorCode(one.err), job_id, attempt_id, outcome, http_status, next_status },
        "outcome not recorded: the job is left to its lease, and will be called again when it lapses",
      );
      b.fail(new OutcomeNotRecorded(job_id, one.err));
    }
  }

  private async write(items: Completion[], tries: number, backoffMs: number): Promise<{ ok: true; rows: { id: string }[] } | { ok: false; err: unknown }> {
    for (let attempt = 1; ; attempt++) {
      try {
        return { ok: true, rows: await completeAttempts(this.db, this.owner, items) };
      } catch (err) {
        if (attempt >= tries) return { ok: false, err };
        this.log.warn({ err, code: errorCode(err), attempt, count: items.length }, "writing outcomes failed; retrying");
        await Bun.sleep(backoffMs * 2 ** (attempt - 1));
      }
    }
  }
}
