/**
 * Region authority rows (migration 005): seed, read, renew, and the fenced move used by both
 * a manual failover and an automatic takeover.
 */
import type { Db, Queryable } from "./db.ts";
import { insertAudit, type Actor } from "./jobs.ts";
import { sql } from "./sql.ts";

export interface AuthorityRow {
  homeRegion: string;
  generation: number;
  holder: string | null;
  leaseUntil: Date;
  changedAt: Date;
  /** The database's clock when read: lease arithmetic uses it, never ours. */
  dbNow: Date;
  /** The dispatch lease: its holder while valid, its term (the low half of the token). */
  leader: string | null;
  leaderTerm: number;
  leaderUntil: Date | null;
}

/** Seeds the row (first start only) with this home region and a lease `ttlMs` ahead. */
export async function seedAuthority(db: Queryable, homeRegion: string, ttlMs = 0): Promise<void> {
  await db.query(sql("AuthoritySeed"), [homeRegion, ttlMs]);
}

interface RawAuthority {
  home_region: string;
  generation: string | number;
  holder: string | null;
  lease_until: Date;
  changed_at: Date;
  db_now: Date;
  leader: string | null;
  leader_term: string | number | null;
  leader_until: Date | null;
}

export async function readAuthority(db: Queryable): Promise<AuthorityRow | undefined> {
  const r = (await db.query<RawAuthority>(sql("AuthorityGet")))[0];
  if (!r) return undefined;
  const leaderValid = r.leader !== null && r.leader_until !== null && r.leader_until.getTime() > r.db_now.getTime();
  return {
    homeRegion: r.home_region,
    generation: Number(r.generation),
    holder: r.holder,
    leaseUntil: r.lease_until,
    changedAt: r.changed_at,
    dbNow: r.db_now,
    leader: leaderValid ? r.leader : null,
    leaderTerm: Number(r.leader_term ?? 0),
    leaderUntil: r.leader_until,
  };
}

/** Extends the authority lease for its holder; undefined when the row moved on. */
export async function renewAuthority(db: Queryable, p: { region: string; generation: number; holder: string; ttlMs: number }): Promise<Date | undefined> {
  return (await db.query<{ lease_until: Date }>(sql("AuthorityRenew"), [p.region, p.generation, p.holder, p.ttlMs]))[0]?.lease_until;
}

export interface MoveResult {
  from: string;
  to: string;
  generation: number;
  /** Jobs the old home had queued, handed back to scheduled. */
  requeued: number;
}

export class AuthorityMoveRefused extends Error {
  constructor(
    message: string,
    readonly current: { homeRegion: string; generation: number },
  ) {
    super(message);
    this.name = "AuthorityMoveRefused";
  }
}

/**
 * The fenced move of authority to `to`: generation + 1, the dispatch lease reset (the old
 * leader's renewals and claims fail from this commit on), queued jobs handed back, audited,
 * announced. Conditions are checked on the locked row:
 * - `onlyIfGeneration`: the row must still be at this generation (automatic takeover: two
 *   standbys cannot both take over from the same expired lease);
 * - `onlyIfExpiredForMs`: the lease must have been expired for at least this long, by the
 *   database's clock.
 * Throws AuthorityMoveRefused when a condition fails or `to` is home already.
 */
export async function moveAuthority(
  db: Db,
  p: { to: string; ttlMs: number; by: Actor; action: "cluster.failover" | "cluster.takeover"; onlyIfGeneration?: number; onlyIfExpiredForMs?: number },
): Promise<MoveResult> {
  return db.tx(async (q) => {
    const cur = (await q.query<{ home_region: string; generation: string | number; lease_until: Date; db_now: Date }>(sql("AuthorityLock")))[0];
    if (!cur) throw new AuthorityMoveRefused("no region authority yet: start a scheduler once so that it seeds HOME_REGION", { homeRegion: "", generation: 0 });
    const current = { homeRegion: cur.home_region, generation: Number(cur.generation) };
    if (cur.home_region === p.to) throw new AuthorityMoveRefused(`${p.to} is the home region already (generation ${current.generation})`, current);
    if (p.onlyIfGeneration !== undefined && current.generation !== p.onlyIfGeneration) {
      throw new AuthorityMoveRefused(`the authority moved meanwhile (generation ${current.generation})`, current);
    }
    // Written so that an unreadable instant (NaN) refuses rather than allows.
    if (p.onlyIfExpiredForMs !== undefined && !(cur.db_now.getTime() - cur.lease_until.getTime() >= p.onlyIfExpiredForMs)) {
      throw new AuthorityMoveRefused(`the home region ${cur.home_region} still holds its lease`, current);
    }
    const moved = (await q.query<{ home_region: string; generation: string | number }>(sql("AuthorityMove"), [p.to, p.ttlMs]))[0]!;
    await q.query(sql("AuthorityResetDispatchLease"));
    const requeued = (await q.query(sql("AuthorityRequeue"))).length;
    const result: MoveResult = { from: cur.home_region, to: moved.home_region, generation: Number(moved.generation), requeued };
    await insertAudit(q, {
      actor: p.by.actor,
      tenant: null,
      action: p.action,
      objectId: null,
      reason: p.by.reason ?? null,
      details: { ...result, previous_lease_until: cur.lease_until.toISOString() },
    });
    await q.query(sql("NotifyAuthority"), [String(result.generation)]);
    await q.query(sql("NotifyLeaseReleased"), ["dispatch"]);
    return result;
  });
}

/** A dispatcher's sign of life in its region, for `ttlMs` (see RegionPresence). */
export async function markRegionPresence(db: Queryable, p: { owner: string; region: string; ttlMs: number }): Promise<void> {
  await db.query(sql("RegionPresence"), [p.owner, p.region, p.ttlMs]);
}

export async function leaveRegionPresence(db: Queryable, p: { owner: string; region: string }): Promise<void> {
  await db.query(sql("RegionPresenceLeave"), [p.owner, p.region]);
}

/** How many dispatcher processes of `region` are alive now. */
export async function liveDispatchersIn(db: Queryable, region: string): Promise<number> {
  return Number((await db.query<{ n: string | number }>(sql("RegionLiveDispatchers"), [region]))[0]?.n ?? 0);
}

/** True while the database is a read-only hot standby (not yet promoted). */
export async function databaseIsStandby(db: Queryable): Promise<boolean> {
  return (await db.query<{ standby: boolean }>(sql("DatabaseReadOnly")))[0]?.standby === true;
}
