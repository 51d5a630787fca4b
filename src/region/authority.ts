/**
 * Region authority, as seen and kept by one process. Every process reads the authority row
 * (the API to answer /v1/cluster and fly-replay, workers and dispatchers to know whether to
 * work); in a dispatcher process it also
 * - renews the authority lease while this process is the home region's dispatch leader, and
 * - in a standby region, takes the authority over (a fenced move, generation + 1) once the
 *   lease has been expired for its TTL plus the clock-skew margin, by the database's clock,
 *   if automatic failover is on.
 *
 * Nothing here is trusted for safety: every claim checks the authority row (region and
 * generation) in its own statement. This decides when to try and what to show.
 */
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import {
  AuthorityMoveRefused,
  leaveRegionPresence,
  markRegionPresence,
  moveAuthority,
  readAuthority,
  renewAuthority,
  type AuthorityRow,
} from "../store/authority.ts";
import type { Db } from "../store/db.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import { fencingToken } from "./fencing.ts";

export interface RegionAuthorityOptions {
  db: Db;
  /** This process's region. */
  region: string;
  /** This process's owner token (the dispatch lease's owner when it leads). */
  owner: string;
  /** The authority lease's TTL; renewed every third of it. */
  ttlMs: number;
  /** Clock-skew margin added before a takeover. */
  skewMs: number;
  /** Whether a standby dispatcher may take over an expired authority. */
  autoFailover: boolean;
  /** Whether this process renews and takes over (it runs a dispatcher). */
  acts: boolean;
  /** Whether this process holds the dispatch lease now. */
  isLeader?: () => boolean;
  log: Logger;
  metrics?: Metrics;
  /** Called when the home region or generation changed. */
  onChange?: (row: AuthorityRow) => void;
}

export class RegionAuthority extends PeriodicLoop<void> {
  private row: AuthorityRow | undefined;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(private readonly o: RegionAuthorityOptions) {
    super("region-authority", o.log);
  }

  /** The last row read (undefined before the first read). */
  get current(): AuthorityRow | undefined {
    return this.row;
  }

  /** Reads the row now (a caller about to refuse on a possibly stale view). */
  reread(): Promise<AuthorityRow | undefined> {
    return this.refresh();
  }

  /** Whether this process's region held the authority at the last read. */
  get isHome(): boolean {
    return this.row?.homeRegion === this.o.region;
  }

  get region(): string {
    return this.o.region;
  }

  /** Reads the row once (so callers have a view at once), then keeps it fresh. */
  async begin(): Promise<void> {
    this.unlisten = await this.o.db.listen(
      "scheduler_authority",
      () => this.poke(),
      () => this.poke(),
    );
    await this.refresh();
    if (this.o.acts)
      await this.markPresence().catch((err) => this.o.log.warn({ err }, "marking this dispatcher's presence in its region failed; retrying next round"));
    this.start();
  }

  async end(): Promise<void> {
    await this.stop();
    await this.unlisten?.();
    if (this.o.acts) await leaveRegionPresence(this.o.db, { owner: this.o.owner, region: this.o.region }).catch(() => {});
  }

  /** Renewed every third of the TTL: alive for a whole TTL after the last renewal. */
  private markPresence(): Promise<void> {
    return markRegionPresence(this.o.db, { owner: this.o.owner, region: this.o.region, ttlMs: this.o.ttlMs });
  }

  async runOnce(): Promise<void> {
    const row = await this.refresh();
    if (!row || !this.o.acts) return;
    try {
      await this.act(row);
    } finally {
      // After the renewal, and never in its way: presence only gates a manual failover.
      await this.markPresence().catch((err) => this.o.log.warn({ err }, "marking this dispatcher's presence in its region failed; retrying next round"));
    }
  }

  private async act(row: AuthorityRow): Promise<void> {
    if (row.homeRegion === this.o.region) {
      if (this.o.isLeader?.()) {
        const until = await renewAuthority(this.o.db, { region: this.o.region, generation: row.generation, holder: this.o.owner, ttlMs: this.o.ttlMs });
        if (until) this.row = { ...row, holder: this.o.owner, leaseUntil: until };
        else await this.refresh();
      }
      return;
    }
    const expiredForMs = row.dbNow.getTime() - row.leaseUntil.getTime();
    const waitMs = this.o.ttlMs + this.o.skewMs;
    if (!this.o.autoFailover || !(expiredForMs >= waitMs)) return;
    try {
      const moved = await moveAuthority(this.o.db, {
        to: this.o.region,
        ttlMs: this.o.ttlMs,
        action: "cluster.takeover",
        by: {
          actor: `auto:${this.o.owner}`,
          reason: `authority lease of ${row.homeRegion} expired ${Math.round(expiredForMs)} ms ago (TTL ${this.o.ttlMs} ms + margin ${this.o.skewMs} ms)`,
        },
        onlyIfGeneration: row.generation,
        onlyIfExpiredForMs: waitMs,
      });
      this.o.log.warn(
        { from: moved.from, to: moved.to, generation: moved.generation, requeued: moved.requeued, expired_ms: Math.round(expiredForMs) },
        "took over region authority",
      );
      await this.refresh();
    } catch (err) {
      if (!(err instanceof AuthorityMoveRefused)) throw err;
      this.o.log.info({ reason: err.message }, "region takeover not needed");
      await this.refresh();
    }
  }

  protected nextDelayMs(): number {
    return (this.o.ttlMs / 3) * (0.9 + Math.random() * 0.2);
  }

  private async refresh(): Promise<AuthorityRow | undefined> {
    const before = this.row;
    const row = await readAuthority(this.o.db);
    this.row = row;
    if (row && (!before || before.homeRegion !== row.homeRegion || before.generation !== row.generation)) {
      this.o.metrics?.regionHome.set(row.homeRegion === this.o.region ? 1 : 0);
      this.o.metrics?.authorityGeneration.set(row.generation);
      if (before) {
        this.o.log.info(
          { home_region: row.homeRegion, generation: row.generation, role: row.homeRegion === this.o.region ? "home" : "standby" },
          "region authority changed",
        );
      }
      this.o.onChange?.(row);
    }
    return row;
  }
}

/** The token a dispatch leader of this generation and term stamps on its claims. */
export function tokenOf(row: Pick<AuthorityRow, "generation">, term: number): number {
  return fencingToken(row.generation, term);
}
