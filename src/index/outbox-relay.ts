/**
 * The outbox relay: applies index_outbox rows (written in the jobs' own transactions) to the
 * due index, at least once, in id order, under the coordinator's fence.
 *
 * One pass, when OutboxPending says a row waits, in one transaction: take the relay lock (one pass at a time, whoever runs it),
 * check that this process still holds the coordinator lease at its epoch (if not, apply
 * nothing), take the oldest `batch` rows, apply them to the index, and delete them only after
 * the index write succeeded. When the write fails the transaction rolls back, the rows stay,
 * and PeriodicLoop retries with backoff. A crash after the write and before the commit
 * repeats the write next time: harmless, ZADD and ZREM are idempotent, and nothing newer for
 * those jobs can have been applied in between (the next pass starts from the same rows).
 *
 * Why id order is the right order: two writes of one job serialize on the job's row lock, and
 * the trigger appends its row after the job's UPDATE, so the later write has the higher id and
 * commits later. A relay that applies rows in id order, one pass at a time, therefore never
 * lets an older state of a job overwrite a newer one. An old coordinator that has not yet
 * noticed a takeover either runs its pass before the new one's (the lock) or finds the lease
 * moved and applies nothing.
 *
 * Several rows for one job in a batch coalesce: the last (highest id) wins, as it was
 * written last. The index holds only a bounded window: an upsert due at or after
 * now + windowMs is not added (the window loader adds it once the window reaches it) but the
 * job is removed, so that an entry at an earlier, no longer valid instant does not linger.
 */
import type { Logger } from "../obs/log.ts";
import type { Db } from "../store/db.ts";
import { type OutboxRow, outboxDelete, outboxLag, outboxPending, outboxRelayFence, outboxRelayLock, outboxTake } from "../store/index-queries.ts";
import type { LeaseHold } from "../store/leases.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import type { DueEntry, DueIndex } from "./due-index.ts";

export interface OutboxRelayOptions {
  db: Db;
  index: DueIndex;
  /** Rows per pass. */
  batch: number;
  /** The index's future window: upserts due at or after now + windowMs are left to the window loader. */
  windowMs: number;
  log: Logger;
  /** The coordinator lease this relay works under (undefined: this process does not hold it). */
  fence: () => Pick<LeaseHold, "name" | "owner" | "epoch"> | undefined;
  /** Pause after a pass that did not fill its batch; default 100 ms. */
  intervalMs?: number;
  /**
   * Called after every pass not fenced off with the outbox lag (seconds since the oldest
   * pending row was written): 0 after an idle pass, which checks no fence.
   */
  onLag?: (seconds: number) => void;
  /** Called after entries were added, with the earliest due instant among them (epoch ms). */
  onUpserted?: (earliestDueMs: number) => void;
  now?: () => number;
  /** Test seam: runs after a pass took its rows and before it writes them to the index. */
  beforeApply?: (rows: number) => Promise<void>;
}

export interface RelayResult {
  /** Rows taken and deleted (before coalescing). */
  applied: number;
  /**
   * True: this process does not hold the coordinator lease (any more), and the pass applied
   * nothing. False: rows were taken under the fence, or none waited and the fence was not
   * checked (an idle pass): not a proof that the lease is still held.
   */
  fenced: boolean;
  /** Age in seconds of the oldest row pending when the pass started; 0 when there was none. */
  lagSeconds: number;
}

export class OutboxRelay extends PeriodicLoop<RelayResult> {
  private readonly intervalMs: number;
  /** The last pass filled its batch: rows are waiting, no need to ask. */
  private lastFull = false;

  constructor(private readonly o: OutboxRelayOptions) {
    super("outbox-relay", o.log);
    if (!Number.isInteger(o.batch) || o.batch < 1) throw new Error(`outbox relay: batch must be a positive integer, got ${o.batch}`);
    this.intervalMs = o.intervalMs ?? 100;
  }

  async runOnce(): Promise<RelayResult> {
    const fence = this.o.fence();
    if (!fence) return { applied: 0, fenced: true, lagSeconds: 0 };
    // An idle relay runs every interval: with nothing waiting, one statement and no
    // transaction. Nothing to apply needs no fence either, so it is not checked. Right after
    // a full batch rows are waiting: not asked.
    if (!this.lastFull && !(await outboxPending(this.o.db))) {
      this.o.onLag?.(0);
      return { applied: 0, fenced: false, lagSeconds: 0 };
    }
    const result = await this.o.db.tx(async (q): Promise<RelayResult> => {
      await outboxRelayLock(q);
      if (!(await outboxRelayFence(q, fence))) {
        return { applied: 0, fenced: true, lagSeconds: 0 };
      }
      const lagSeconds = await outboxLag(q);
      const rows = await outboxTake(q, this.o.batch);
      if (rows.length === 0) return { applied: 0, fenced: false, lagSeconds };
      await this.o.beforeApply?.(rows.length);
      await this.apply(rows);
      // Only now, after the index write succeeded; a throw above rolls the take back.
      await outboxDelete(
        q,
        rows.map((r) => r.id),
      );
      return { applied: rows.length, fenced: false, lagSeconds };
    });
    this.lastFull = result.applied === this.o.batch;
    if (result.fenced) {
      this.o.log.debug({ lease: fence.name, epoch: fence.epoch }, "outbox relay: the coordinator lease moved on; this relay applies nothing");
    } else {
      this.o.onLag?.(result.lagSeconds);
    }
    return result;
  }

  private async apply(rows: OutboxRow[]): Promise<void> {
    // Coalesce: the highest id per job wins (rows come in id order, so the last one seen).
    const last = new Map<string, Date | null>();
    for (const r of [...rows].sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))) last.set(r.job_id, r.due_at);
    const windowEnd = (this.o.now ?? Date.now)() + this.o.windowMs;
    const upserts: DueEntry[] = [];
    const removes: string[] = [];
    for (const [jobId, dueAt] of last) {
      if (dueAt !== null && dueAt.getTime() < windowEnd) upserts.push({ jobId, dueMs: dueAt.getTime() });
      else removes.push(jobId); // removed, or moved beyond the window (the loader adds it later)
    }
    if (removes.length > 0) await this.o.index.entriesRemove({ jobIds: removes });
    if (upserts.length > 0) {
      await this.o.index.entriesUpsert({ entries: upserts });
      this.o.onUpserted?.(upserts.reduce((m, u) => Math.min(m, u.dueMs), Infinity));
    }
  }

  /**
   * A full batch means more rows are probably waiting: go again at once. Otherwise the outbox
   * is (nearly) drained and a short pause bounds the relay's added latency (a new row waits
   * at most ~intervalMs) while an idle relay costs one cheap query per interval (OutboxPending).
   */
  protected nextDelayMs(last: RelayResult | undefined): number {
    return last?.applied === this.o.batch ? 0 : this.intervalMs;
  }
}
