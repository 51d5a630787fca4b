import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";

export interface LeaseHold {
  name: string;
  owner: string;
  epoch: number;
  leaseUntil: Date;
}

/**
 * Takes the named lease if it is free or expired beyond the skew margin; bumps the epoch.
 * With `region`, only while that region holds the region authority.
 */
export async function acquireLease(
  db: Queryable,
  p: { name: string; owner: string; ttlMs: number; skewMs: number; region?: string },
): Promise<LeaseHold | undefined> {
  const row = (await db.query<{ epoch: string; lease_until: Date }>(sql("AcquireLease"), [p.name, p.owner, p.ttlMs, p.skewMs, p.region ?? null]))[0];
  return row ? { name: p.name, owner: p.owner, epoch: Number(row.epoch), leaseUntil: row.lease_until } : undefined;
}

/** Extends the lease only while it still names this owner and epoch (and, with `region`, that region is home). */
export async function renewLease(db: Queryable, hold: LeaseHold, ttlMs: number, region?: string): Promise<LeaseHold | undefined> {
  const row = (await db.query<{ lease_until: Date }>(sql("RenewLease"), [hold.name, hold.owner, hold.epoch, ttlMs, region ?? null]))[0];
  return row ? { ...hold, leaseUntil: row.lease_until } : undefined;
}

export async function releaseLease(db: Queryable, hold: LeaseHold): Promise<boolean> {
  const rows = await db.query(sql("ReleaseLease"), [hold.name, hold.owner, hold.epoch]);
  if (rows.length > 0) await db.query(sql("NotifyLeaseReleased"), [hold.name]);
  return rows.length > 0;
}

export async function getLease(db: Queryable, name: string) {
  const row = (await db.query<{ owner: string | null; epoch: string; lease_until: Date }>(sql("GetLease"), [name]))[0];
  return row ? { owner: row.owner, epoch: Number(row.epoch), leaseUntil: row.lease_until } : undefined;
}
