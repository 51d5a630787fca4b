import type { DueClaimer } from "./due-claimer.ts";
import type { LocalWorker } from "./local-worker.ts";
import { QueueUptake } from "./queue-uptake.ts";
import type { Db } from "../store/db.ts";
import { type ClaimParams, countQueued, notifyQueued } from "../store/dispatch-queries.ts";
import type { ShardFence } from "../store/shards.ts";
import type { ClaimRow } from "../store/types.ts";

/** Queued jobs the reserved class may have beyond the queue target (its own small lane). */
const RESERVED_QUEUE = 16;

/** What a claim path took: `claimed` undefined when it sent no claim; `limit`, how many it asked for. */
export interface ClaimTaken {
  claimed?: ClaimRow[];
  limit: number;
  localFull?: boolean;
}

/**
 * The two ways a dispatcher's pass claims due jobs (DueClaimer finds and takes them): for the
 * worker in its own process, straight into running, or into `queued` for workers elsewhere,
 * sized by how fast they take it.
 */
export class DispatchClaims {
  private readonly uptake = new QueueUptake();

  constructor(
    private readonly o: {
      db: Db;
      claimer: DueClaimer;
      /** Jobs a claim takes at most (SCHEDULER_DISPATCH_BATCH). */
      batch: number;
      leaseTtlMs: number;
      reservedSlots?: { slots: number; minPriority: number };
    },
  ) {}

  /**
   * Claims for the worker in this process, straight into running under its lease. A claim
   * waits until the worker has room for a batch, so each one carries many jobs. No claim
   * (claimed undefined) when the worker is full.
   */
  async forLocal(local: LocalWorker, fence: ShardFence, token: number): Promise<ClaimTaken> {
    const rs = this.o.reservedSlots;
    let limit = 0;
    const claimed = await local.fill(this.o.batch, async (room, hand) => {
      // Claims that start their jobs take only what starts (the rest stays scheduled, where
      // the planner still chooses among it).
      limit = room.onlyWhatStarts && room.startLimit > 0 ? Math.min(room.any, room.startLimit) + room.reserved : room.any + room.reserved;
      const direct = { fence, token, ttlMs: this.o.leaseTtlMs, worker: local.owner, startLimit: room.startLimit };
      // Claimed jobs are running under the worker's lease from the claim's commit on: they
      // go to it even if a later step of the pass throws, or they would wait out the lease.
      const handOver = async (p: ClaimParams) => {
        const got: ClaimRow[] = [];
        const sentAt = performance.now();
        try {
          await this.o.claimer.claim(p, got);
        } finally {
          hand(got, performance.now() - sentAt);
        }
      };
      // The reserved slots first, for their class only; then the rest for anyone.
      if (room.reserved > 0) await handOver({ ...direct, limit: room.reserved, minPriority: rs!.minPriority });
      if (room.any > 0) await handOver({ ...direct, limit: limit - room.reserved });
    });
    return claimed ? { claimed, limit } : { limit, localFull: true };
  }

  /**
   * Claims into `queued` for workers in other processes. The queue is kept short: about half
   * a second of what workers have been taking. Beyond that, due jobs are better left
   * scheduled, where the planner's fairness, priority and quotas still choose among them,
   * than parked in queued in the order of one claim. No claim (claimed undefined) when full.
   */
  async forQueue(fence: ShardFence, token: number): Promise<ClaimTaken> {
    const rs = this.o.reservedSlots;
    const cap = this.o.batch * 2;
    const depth = await countQueued(this.o.db, cap);
    const target = this.uptake.target(depth, cap);
    const space = target - depth;
    let limit: number;
    let minPriority: number | undefined;
    if (space > 0) {
      limit = Math.min(this.o.batch, space);
    } else {
      // A full queue of other work must not keep the reserved class from its reserved
      // slots: it has a small lane of its own beyond the target.
      const high = rs ? await countQueued(this.o.db, RESERVED_QUEUE, rs.minPriority) : RESERVED_QUEUE;
      if (high >= RESERVED_QUEUE) return { limit: 0 };
      limit = RESERVED_QUEUE - high;
      minPriority = rs!.minPriority;
    }
    const claimed: ClaimRow[] = [];
    // Queued jobs wait under a lease too; if no worker takes them in this long, the
    // reaper hands them back.
    try {
      await this.o.claimer.claim({ fence, limit, token, ttlMs: this.o.leaseTtlMs * 10, minPriority }, claimed);
    } finally {
      // Queued by a committed claim: workers are told even if a later step of the pass threw.
      // They are in other processes, so NOTIFY is their one wake-up.
      if (claimed.length > 0) await notifyQueued(this.o.db, claimed.length);
    }
    if (minPriority !== undefined && claimed.length === 0) return { limit };
    this.uptake.queued(depth + claimed.length);
    return { claimed, limit };
  }
}
