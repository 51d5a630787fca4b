import type { Db } from "../store/db.ts";
import { acquireLease, releaseLease, renewLease, type LeaseHold } from "../store/leases.ts";
import type { Logger } from "../obs/log.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";

export interface LeaderElectorOptions {
  db: Db;
  name: string;
  owner: string;
  ttlMs: number;
  skewMs: number;
  log: Logger;
  /** Lead only while this region holds the region authority (checked in the lease's SQL). */
  region?: string;
  onChange?: (hold: LeaseHold | undefined) => void;
}

/**
 * Holds a named lease: acquire when free (the epoch rises), renew with the owner token and
 * epoch, release on stop. Nothing here is trusted for safety: every claim checks the lease
 * row in its own statement. This only decides when to try.
 */
export class LeaderElector extends PeriodicLoop<void> {
  private hold: LeaseHold | undefined;
  /** performance.now() before which the hold is trusted: our own clock, never the database's. */
  private trustedUntil = 0;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(private readonly o: LeaderElectorOptions) {
    super(`leader-elector(${o.name})`, o.log);
  }

  /**
   * The hold, while it is surely still ours: measured from when the renewal was *sent*, on
   * this process's monotonic clock, so a clock that disagrees with the database's cannot
   * make it look valid (or invalid). Claims are fenced in SQL regardless.
   */
  get current(): LeaseHold | undefined {
    return this.hold && performance.now() < this.trustedUntil ? this.hold : undefined;
  }

  async begin(): Promise<void> {
    // A released lease is announced: try at once instead of waiting a whole period.
    this.unlisten = await this.o.db.listen("scheduler_lease", (name) => {
      if (name === this.o.name && !this.hold) this.poke();
    });
    this.start();
  }

  async runOnce(): Promise<void> {
    const sentAt = performance.now();
    if (this.hold) {
      const renewed = await renewLease(this.o.db, this.hold, this.o.ttlMs, this.o.region);
      if (renewed) {
        this.hold = renewed;
        this.trustedUntil = sentAt + this.o.ttlMs;
        return;
      }
      this.o.log.warn({ lease: this.o.name, epoch: this.hold.epoch }, "lost leadership: the lease now names another holder, or this region is no longer home");
      this.set(undefined);
    }
    const got = await acquireLease(this.o.db, { name: this.o.name, owner: this.o.owner, ttlMs: this.o.ttlMs, skewMs: this.o.skewMs, region: this.o.region });
    if (got) {
      this.o.log.info({ lease: this.o.name, epoch: got.epoch, owner: this.o.owner }, "became leader");
      this.trustedUntil = sentAt + this.o.ttlMs;
      this.set(got);
    }
  }

  protected nextDelayMs(): number {
    // Renew at a third of the TTL: two renewals may fail before the lease lapses.
    return (this.o.ttlMs / 3) * (0.9 + Math.random() * 0.2);
  }

  protected override async onStop(): Promise<void> {
    await this.unlisten?.();
    if (this.hold) {
      const h = this.hold;
      this.set(undefined);
      await releaseLease(this.o.db, h).catch((err) => this.o.log.warn({ err }, "could not release the lease; it will expire"));
    }
  }

  private set(hold: LeaseHold | undefined): void {
    this.hold = hold;
    this.o.onChange?.(hold);
  }
}
