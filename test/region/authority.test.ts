/**
 * The region authority in the database: seeding, the fenced move, and that every claim,
 * election and pre-call check outside the authority's region or generation is refused in
 * its own statement.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { AuthorityMoveRefused, moveAuthority, readAuthority, renewAuthority, seedAuthority } from "../../src/store/authority.ts";
import { claimDue } from "../../src/store/dispatch-queries.ts";
import { acquireLease, renewLease } from "../../src/store/leases.ts";
import { renewShards } from "../../src/store/shards.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";
import { claimQueued, startAttempts } from "../../src/store/worker-queries.ts";
import { fencingToken } from "../../src/region/fencing.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";

const by = { actor: "test", reason: "drill" };
/** The pre-call check's lease: extended to 10 s, and it must still be live. */
const LEASE = { ttlMs: 10_000, marginMs: 0 };

for (const driver of DRIVERS) {
  describe(`region authority (${driver})`, () => {
    let t: TestDb;
    beforeEach(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "iad");
    });
    afterEach(async () => {
      await t.close();
    });

    test("the first seed decides the home region; later seeds change nothing", async () => {
      await seedAuthority(t.db, "fra");
      const row = (await readAuthority(t.db))!;
      expect(row).toMatchObject({ homeRegion: "iad", generation: 0, holder: null, leader: null });
      expect(row.leaseUntil.getTime()).toBeLessThanOrEqual(row.dbNow.getTime()); // seeded with TTL 0 here
    });

    test("renew extends the lease only for the home region at its generation", async () => {
      expect(await renewAuthority(t.db, { region: "fra", generation: 0, holder: "x", ttlMs: 5000 })).toBeUndefined();
      expect(await renewAuthority(t.db, { region: "iad", generation: 1, holder: "x", ttlMs: 5000 })).toBeUndefined();
      const until = await renewAuthority(t.db, { region: "iad", generation: 0, holder: "x", ttlMs: 5000 });
      expect(until!.getTime()).toBeGreaterThan(Date.now() + 3000);
      expect((await readAuthority(t.db))!.holder).toBe("x");
    });

    test("a move bumps the generation, frees the leader lease, hands queued jobs back and is audited", async () => {
      await acquireLease(t.db, { name: "dispatch", owner: "A", ttlMs: 60_000, skewMs: 0, region: "iad" });
      const hold = await takeShards(t.db, "A", { region: "iad" });
      const j = await insertJob(t.db);
      const claimed = await claimDue(t.db, { fence: hold, limit: 10, token: fencingToken(0, tokenOf(hold)), ttlMs: 60_000 });
      expect(claimed.map((c) => c.status)).toEqual(["queued"]);
      const moved = await moveAuthority(t.db, { to: "fra", ttlMs: 5000, by, action: "cluster.failover" });
      expect(moved).toEqual({ from: "iad", to: "fra", generation: 1, requeued: 1 });
      const row = (await readAuthority(t.db))!;
      expect(row).toMatchObject({ homeRegion: "fra", generation: 1, leader: null, leaderTerm: 0 });
      expect((await jobRow(t.db, j.id))!.status).toBe("scheduled");
      const [audit] = await t.db.query<{ actor: string; action: string; reason: string; details: any }>(
        "SELECT * FROM audit_log WHERE action = 'cluster.failover'",
      );
      expect(audit).toMatchObject({ actor: "test", reason: "drill", details: { from: "iad", to: "fra", generation: 1, requeued: 1 } });
      // The new home's first shard holder takes a new term; its tokens are above every old one.
      const next = await takeShards(t.db, "B", { region: "fra", generation: 1 });
      expect(tokenOf(next)).toBeGreaterThan(tokenOf(hold));
      expect(fencingToken(1, tokenOf(next))).toBeGreaterThan(fencingToken(0, 2 ** 32 - 1));
    });

    test("a move is refused to the home region itself, from a stale generation, or while the lease is fresh", async () => {
      await expect(moveAuthority(t.db, { to: "iad", ttlMs: 5000, by, action: "cluster.failover" })).rejects.toBeInstanceOf(AuthorityMoveRefused);
      await renewAuthority(t.db, { region: "iad", generation: 0, holder: "x", ttlMs: 60_000 });
      await expect(moveAuthority(t.db, { to: "fra", ttlMs: 5000, by, action: "cluster.takeover", onlyIfExpiredForMs: 1000 })).rejects.toThrow(
        "still holds its lease",
      );
      await expect(moveAuthority(t.db, { to: "fra", ttlMs: 5000, by, action: "cluster.takeover", onlyIfGeneration: 7 })).rejects.toThrow("moved meanwhile");
      expect((await readAuthority(t.db))!).toMatchObject({ homeRegion: "iad", generation: 0 });
      // Two standbys taking over from the same generation: exactly one wins.
      await t.db.query("UPDATE region_authority SET lease_until = now() - interval '1 hour'");
      const results = await Promise.allSettled(
        ["fra", "syd"].map((to) => moveAuthority(t.db, { to, ttlMs: 5000, by, action: "cluster.takeover", onlyIfGeneration: 0, onlyIfExpiredForMs: 1000 })),
      );
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect((await readAuthority(t.db))!.generation).toBe(1);
    });

    test("after a move the old home's leader, its claims and its workers are refused in SQL", async () => {
      const hold = (await acquireLease(t.db, { name: "dispatch", owner: "A", ttlMs: 60_000, skewMs: 0, region: "iad" }))!;
      const fence = await takeShards(t.db, "A", { region: "iad" });
      const j = await insertJob(t.db);
      // Claimed straight to running under an iad worker's lease (the in-process handoff).
      const [running] = await claimDue(t.db, { fence, limit: 10, token: fencingToken(0, tokenOf(fence)), ttlMs: 60_000, worker: "W-iad" });
      expect(running!.id).toBe(j.id);
      await moveAuthority(t.db, { to: "fra", ttlMs: 5000, by, action: "cluster.failover" });
      // The worker's pre-call check refuses: its region is no longer home.
      expect(await startAttempts(t.db, "W-iad", "iad", [{ id: j.id, gen: running!.lease_generation, version: running!.version }], LEASE)).toEqual([]);
      // The old leader can neither renew nor claim, even with its old hold.
      expect(await renewLease(t.db, hold, 60_000, "iad")).toBeUndefined();
      expect((await renewShards(t.db, "A", fence.shards, 60_000, "iad")).size).toBe(0);
      await insertJob(t.db);
      expect(await claimDue(t.db, { fence, limit: 10, token: fencingToken(0, tokenOf(fence)), ttlMs: 60_000 })).toEqual([]);
      // Nor can anyone in iad become leader again.
      expect(await acquireLease(t.db, { name: "dispatch", owner: "A2", ttlMs: 60_000, skewMs: 0, region: "iad" })).toBeUndefined();
      // An fra leader claiming with the old generation is refused too; with the new one it works.
      const fraHold = await takeShards(t.db, "B", { region: "fra", generation: 1 });
      expect(await claimDue(t.db, { fence: { ...fraHold, generation: 0 }, limit: 10, token: 1, ttlMs: 60_000 })).toEqual([]);
      const got = await claimDue(t.db, { fence: fraHold, limit: 10, token: fencingToken(1, tokenOf(fraHold)), ttlMs: 60_000 });
      expect(got).toHaveLength(1);
      expect(Number(got[0]!.epoch)).toBe(fencingToken(1, tokenOf(fraHold)));
      // Workers: iad takes nothing from the queue; fra does.
      expect(await claimQueued(t.db, { owner: "W-iad", region: "iad", limit: 10, leaseTtlMs: 10_000 })).toEqual([]);
      const [w] = await claimQueued(t.db, { owner: "W-fra", region: "fra", limit: 10, leaseTtlMs: 10_000 });
      expect(await startAttempts(t.db, "W-fra", "fra", [{ id: w!.id, gen: w!.lease_generation, version: w!.version }], LEASE)).toHaveLength(1);
    });

    test("a job claimed under an older generation is never called, even by a worker of the new home", async () => {
      const hold = await takeShards(t.db, "A", { region: "iad" });
      const j = await insertJob(t.db);
      await claimDue(t.db, { fence: hold, limit: 10, token: fencingToken(0, tokenOf(hold)), ttlMs: 60_000, worker: "W" });
      await moveAuthority(t.db, { to: "fra", ttlMs: 5000, by, action: "cluster.failover" });
      const row = (await jobRow(t.db, j.id))!;
      // Same owner name, now in fra: the job's token is from generation 0.
      expect(await startAttempts(t.db, "W", "fra", [{ id: j.id, gen: row.lease_generation, version: row.version }], LEASE)).toEqual([]);
    });
  });
}
