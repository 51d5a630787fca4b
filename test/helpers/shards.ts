import type { Db } from "../../src/store/db.ts";
import { acquireShards, type ShardFence } from "../../src/store/shards.ts";

/**
 * Takes shards 0..count-1 for `owner`, after letting any earlier holder's leases lapse (a
 * test's way to hand shards over): the fence a claim by this owner needs.
 */
export async function takeShards(db: Db, owner: string, o: { count?: number; region?: string; generation?: number } = {}): Promise<ShardFence> {
  const count = o.count ?? 1;
  const region = o.region ?? "local";
  await db.query("UPDATE leases SET lease_until = now() - interval '1 hour' WHERE name LIKE 'dispatch:%'");
  const shards = await acquireShards(db, { owner, shards: Array.from({ length: count }, (_, i) => i), ttlMs: 60_000, skewMs: 0, region });
  if (shards.length !== count) throw new Error(`takeShards: got ${shards.length} of ${count} shards`);
  return { owner, shards, count, region, generation: o.generation ?? 0 };
}

/** The fencing token a claim under `f` stamps (generation 0). */
export const tokenOf = (f: ShardFence) => Math.max(...f.shards.map((h) => h.epoch));

/**
 * Gives back every shard a test took by hand: a scheduler started afterwards on the same
 * database would otherwise wait for those leases (a minute) before it could claim the jobs
 * of those shards.
 */
export async function releaseTestShards(db: Db): Promise<void> {
  await db.query("UPDATE leases SET owner = NULL, lease_until = '-infinity' WHERE name LIKE 'dispatch:%'");
}
