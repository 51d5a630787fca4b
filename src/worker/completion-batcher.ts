import type { Db } from "../store/db.ts";
import { errorCode } from "../store/db-errors.ts";
import { completeAttempts, type Completion } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";

/** Writes of a whole batch before it is split into single rows. */
const BATCH_TRIES = 3;
/** Writes of one row before its job is left to its lease. */
const ROW_TRIES = 3;

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
 * outcomes that arrive during a flush go into the next. Each push resolves with whether the
 * job row accepted it (false: a late completion after the lease moved on).
 *
 * No outcome is dropped for another's sake: a batch that cannot be written (a deadlock that
 * keeps coming back, one row the database refuses) is written row by row, and only a row
 * that cannot be written alone is given up, logged with its job id; its job's lease then
 * lapses and the reaper gives it back, so a successful call will be made again.
 */
export class CompletionBatcher {
  private pending: { item: Completion; done: (accepted: boolean) => void; fail: (e: unknown) => void }[] = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly owner: string,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    private readonly maxBatch = 500,
  ) {}

  push(item: Completion): Promise<boolean> {
    return new Promise((done, fail) => {
      this.pending.push({ item, done, fail });
      this.kick();
    });
  }

  async drain(): Promise<void> {
    while (this.flushing || this.pending.length > 0) {
      this.kick();
      await this.flushing;
    }
  }

  private kick(): void {
    if (this.flushing || this.pending.length === 0) return;
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined;
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
