import type { Db } from "../store/db.ts";
import { completeAttempts, type Completion } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";

/**
 * Collects finished calls and writes them in one statement per batch. One flush at a time;
 * outcomes that arrive during a flush go into the next. Each push resolves with whether the
 * job row accepted it (false: a late completion after the lease moved on).
 */
export class CompletionBatcher {
  private pending: { item: Completion; done: (accepted: boolean) => void; fail: (e: unknown) => void }[] = [];
  private flushing: Promise<void> | undefined;

  constructor(private readonly db: Db, private readonly owner: string, private readonly log: Logger, private readonly maxBatch = 500) {}

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
    for (let attempt = 1; ; attempt++) {
      try {
        const rows = await completeAttempts(this.db, this.owner, batch.map((b) => b.item));
        const accepted = new Set(rows.map((r) => r.id));
        for (const b of batch) b.done(accepted.has(b.item.job_id));
        return;
      } catch (err) {
        // The outcome is worth a few retries: losing it means a needless repeat call after
        // the lease lapses. Past that, the reaper's recovery still keeps the job safe.
        if (attempt >= 5) {
          for (const b of batch) b.fail(err);
          return;
        }
        this.log.warn({ err, attempt, count: batch.length }, "writing outcomes failed; retrying");
        await Bun.sleep(100 * 2 ** attempt);
      }
    }
  }
}
