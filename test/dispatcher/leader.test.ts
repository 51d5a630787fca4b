import { describe, expect, test } from "bun:test";
import { claimDue } from "../../src/store/dispatch-queries.ts";
import { acquireLease, getLease, releaseLease, renewLease } from "../../src/store/leases.ts";
import { DRIVERS, describeDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

for (const driver of DRIVERS) {
  describe(`leases and fencing (${driver})`, () => {
    const t = describeDb(driver);

    test("one holder at a time; the epoch rises on every change of holder", async () => {
      const a = await acquireLease(t.db, { name: "l1", owner: "A", ttlMs: 5000, skewMs: 0 });
      expect(a?.epoch).toBe(1);
      expect(await acquireLease(t.db, { name: "l1", owner: "B", ttlMs: 5000, skewMs: 0 })).toBeUndefined();
      expect(await releaseLease(t.db, a!)).toBe(true);
      const b = await acquireLease(t.db, { name: "l1", owner: "B", ttlMs: 5000, skewMs: 0 });
      expect(b?.epoch).toBe(2);
    });

    test("renew and release only with the owner token and epoch", async () => {
      const a = (await acquireLease(t.db, { name: "l2", owner: "A", ttlMs: 5000, skewMs: 0 }))!;
      expect(await renewLease(t.db, { ...a, owner: "B" }, 5000)).toBeUndefined();
      expect(await releaseLease(t.db, { ...a, owner: "B" })).toBe(false);
      expect(await renewLease(t.db, { ...a, epoch: a.epoch + 1 }, 5000)).toBeUndefined();
      expect(await renewLease(t.db, a, 5000)).toBeDefined();
      expect((await getLease(t.db, "l2"))?.owner).toBe("A");
    });

    test("an expired lease is taken over only after the clock-skew margin", async () => {
      const a = (await acquireLease(t.db, { name: "l3", owner: "A", ttlMs: 1000, skewMs: 0 }))!;
      await t.db.query("UPDATE leases SET lease_until = now() - interval '500 ms' WHERE name = 'l3'");
      expect(await acquireLease(t.db, { name: "l3", owner: "B", ttlMs: 1000, skewMs: 2000 })).toBeUndefined();
      const b = await acquireLease(t.db, { name: "l3", owner: "B", ttlMs: 1000, skewMs: 100 });
      expect(b?.epoch).toBe(a.epoch + 1);
    });

    test("a paused leader whose lease was taken over cannot claim: the claim is fenced in its own statement", async () => {
      const job = await insertJob(t.db);
      const old = await takeShards(t.db, "old");
      // The old holder pauses past its TTL; another node takes its shard over (takeShards
      // lets the old lease lapse first).
      const fresh = await takeShards(t.db, "new");
      expect(tokenOf(fresh)).toBeGreaterThan(tokenOf(old));
      // The old leader wakes up believing it still leads, and tries to claim.
      const stale = await claimDue(t.db, { fence: old, limit: 10, token: tokenOf(old), ttlMs: 10_000 });
      expect(stale).toHaveLength(0);
      expect((await jobRow(t.db, job.id)).status).toBe("scheduled");
      // The new leader claims it, tagged with the new epoch.
      const claimed = await claimDue(t.db, { fence: fresh, limit: 10, token: tokenOf(fresh), ttlMs: 10_000 });
      expect(claimed.map((c) => c.id)).toContain(job.id);
      const row = await jobRow(t.db, job.id);
      expect(row.status).toBe("queued");
      expect(Number(row.epoch)).toBe(tokenOf(fresh));
    });

    test("a leader whose own lease lapsed (nobody took over yet) cannot claim either", async () => {
      const job = await insertJob(t.db);
      const h = await takeShards(t.db, "solo");
      await t.db.query("UPDATE leases SET lease_until = now() - interval '1 ms' WHERE name LIKE 'dispatch:%'");
      expect(await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 10_000 })).toHaveLength(0);
      expect((await jobRow(t.db, job.id)).status).toBe("scheduled");
    });

    test("claims come in bounded batches, oldest due first, and never a job not yet due", async () => {
      await t.db.query("UPDATE jobs SET status = 'cancelled' WHERE status = 'scheduled'");
      const h = await takeShards(t.db, "z");
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await insertJob(t.db, { due_at: new Date(Date.now() - 5000 + i * 100) })).id);
      const future = await insertJob(t.db, { due_at: new Date(Date.now() + 60_000) });
      const first = await claimDue(t.db, { fence: h, limit: 3, token: tokenOf(h), ttlMs: 10_000 });
      expect(first.map((c) => c.id).sort()).toEqual(ids.slice(0, 3).sort());
      const second = await claimDue(t.db, { fence: h, limit: 3, token: tokenOf(h), ttlMs: 10_000 });
      expect(second.map((c) => c.id).sort()).toEqual(ids.slice(3).sort());
      expect((await jobRow(t.db, future.id)).status).toBe("scheduled");
    });
  });
}
