import type { Db } from "../store/db.ts";
import { acquireShards, joinShards, leaveShards, releaseShards, renewShards, shardState, type ShardHold } from "../store/shards.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";

export interface ShardOwnershipOptions {
  db: Db;
  owner: string;
  /** SCHEDULER_SHARDS: how many shards the due-time space is cut into. */
  count: number;
  ttlMs: number;
  skewMs: number;
  /** Hold shards only while this region holds the region authority (checked in SQL). */
  region: string;
  log: Logger;
  metrics: Metrics;
  onChange?: (held: ShardHold[]) => void;
}

/**
 * This dispatcher's share of the shards. Every pass: extend its membership and the leases it
 * holds (those not extended are lost: taken after a lapse), then even out — give back what
 * is above a fair share (shards / live dispatchers, rounded up), take free shards up to it.
 * It never takes a shard that another dispatcher holds: a shard moves only once its holder
 * gave it back or let it lapse (plus the skew margin), and every claim checks the shard's
 * lease row (owner + epoch) in its own statement, so the old holder's generation is dead
 * before the new one claims. Nothing here is trusted for safety; it decides when to try.
 */
export class ShardOwnership extends PeriodicLoop<void> {
  private readonly held = new Map<number, ShardHold>();
  /** performance.now() until which the holds are surely ours (from when the renewal was sent). */
  private trustedUntil = 0;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(private readonly o: ShardOwnershipOptions) {
    super("shard-ownership", o.log);
  }

  /** The shards surely still ours; none once a renewal is overdue (a paused process wakes up owning nothing). */
  get current(): ShardHold[] {
    return performance.now() < this.trustedUntil ? [...this.held.values()].sort((a, b) => a.shard - b.shard) : [];
  }

  async begin(): Promise<void> {
    // Shards given back by another dispatcher: even out now, not at the next period.
    this.unlisten = await this.o.db.listen("scheduler_shards", () => this.poke());
    this.start();
  }

  async runOnce(): Promise<void> {
    const sentAt = performance.now();
    const before = this.held.size;
    let changed = false;
    const joined = await joinShards(this.o.db, this.o.owner, this.o.ttlMs, this.o.region);
    if (this.held.size > 0) {
      const holds = [...this.held.values()];
      const renewed = joined ? await renewShards(this.o.db, this.o.owner, holds, this.o.ttlMs, this.o.region) : new Set<number>();
      const lost = holds.filter((h) => !renewed.has(h.shard));
      for (const h of lost) this.held.delete(h.shard);
      if (lost.length > 0) {
        changed = true;
        this.o.metrics.shardHandoffs.inc({ kind: "lost" }, lost.length);
        this.o.log.warn({ shards: lost.map((h) => h.shard) }, "shards lost: their leases lapsed and moved, or this region is no longer home");
      }
    }
    this.trustedUntil = sentAt + this.o.ttlMs;
    if (joined) changed = (await this.evenOut()) || changed;
    if (changed || before !== this.held.size) this.changed();
  }

  /** Gives back above a fair share, takes free shards up to it. Returns whether anything moved. */
  private async evenOut(): Promise<boolean> {
    const { shards, live } = await shardState(this.o.db, this.o.count, this.o.skewMs);
    const fair = Math.ceil(this.o.count / Math.max(1, live));
    if (this.held.size > fair) {
      // The most recently taken go back first: the longest-held keep their warm state.
      const extra = [...this.held.values()].sort((a, b) => b.epoch - a.epoch || b.shard - a.shard).slice(0, this.held.size - fair);
      const released = await releaseShards(this.o.db, this.o.owner, extra);
      for (const s of released) this.held.delete(s);
      if (released.length > 0) {
        this.o.metrics.shardHandoffs.inc({ kind: "released" }, released.length);
        this.o.log.info({ shards: released, fair_share: fair, live }, "shards given back: more than a fair share");
      }
      return released.length > 0;
    }
    if (this.held.size < fair) {
      const free = shuffle(shards.filter((s) => s.free && !this.held.has(s.shard)).map((s) => s.shard));
      const got: ShardHold[] = [];
      // Asked for what is missing; those not got (taken meanwhile, or a row an old holder's
      // transaction still locks: skipped) are made up from the next free ones, in this pass.
      for (let next = 0; this.held.size < fair && next < free.length; ) {
        const ask = free.slice(next, next + fair - this.held.size);
        next += ask.length;
        const taken = await acquireShards(this.o.db, { owner: this.o.owner, shards: ask, ttlMs: this.o.ttlMs, skewMs: this.o.skewMs, region: this.o.region });
        for (const h of taken) {
          this.held.set(h.shard, h);
          got.push(h);
        }
      }
      if (got.length > 0) {
        this.o.metrics.shardHandoffs.inc({ kind: "acquired" }, got.length);
        this.o.log.info({ shards: got.map((h) => h.shard), epochs: [...new Set(got.map((h) => h.epoch))], fair_share: fair, live }, "shards taken");
      }
      return got.length > 0;
    }
    return false;
  }

  private changed(): void {
    this.o.metrics.shardsOwned.set(this.held.size);
    this.o.onChange?.(this.current);
  }

  protected nextDelayMs(): number {
    // Renew at a third of the TTL: two renewals may fail before the leases lapse.
    return (this.o.ttlMs / 3) * (0.9 + Math.random() * 0.2);
  }

  protected override async onStop(): Promise<void> {
    await this.unlisten?.();
    const holds = [...this.held.values()];
    this.held.clear();
    this.trustedUntil = 0;
    try {
      if (holds.length > 0) {
        // Given back at once (announced), so the others take over now rather than after the TTL.
        const released = await releaseShards(this.o.db, this.o.owner, holds);
        this.o.metrics.shardHandoffs.inc({ kind: "released" }, released.length);
        this.o.log.info({ shards: released }, "shards given back: stopping");
      }
      await leaveShards(this.o.db, this.o.owner);
    } catch (err) {
      this.o.log.warn({ err }, "could not give the shards back; their leases will lapse");
    }
    this.changed();
  }
}

function shuffle<T>(xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}
