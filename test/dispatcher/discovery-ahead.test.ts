/**
 * Issue 15: a claim pass is a discovery (SampleDue) and a claim (ClaimDueIds) one after the
 * other, and the worker's slots wait for both. While a pass's claim is in flight, the next
 * pass's discovery runs beside it, leaving out the jobs being claimed. The interleavings
 * forced here, with the claim's reply held (afterClaimReply) while the discovery ahead runs:
 * - it never offers a job the claim in flight takes, and the next pass uses it (no second
 *   discovery) and claims only jobs nobody claimed;
 * - a job it offered that was cancelled before the next claim is not claimed (the claim checks
 *   every candidate again);
 * - one older than its maximum age (AHEAD_MAX_AGE_MS; here set per test, so that a slow
 *   machine cannot turn one case into the other), or short of the next pass's limit, is not used: the pass
 *   looks again.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { DispatchPlanner } from "../../src/dispatcher/dispatch-planner.ts";
import { DueClaimer } from "../../src/dispatcher/due-claimer.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { insertJobs } from "../../src/store/jobs.ts";
import type { ShardFence } from "../../src/store/shards.ts";
import type { ClaimRow } from "../../src/store/types.ts";
import { DbClock } from "../../src/time/db-clock.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

const FLOW = { weights: { high: 8, normal: 3, low: 1 }, agingMs: 60_000, tenantDefault: {}, tenantOverrides: {} };

for (const driver of DRIVERS) {
  describe(`discovery ahead of the next claim pass (${driver})`, () => {
    let t: TestDb;
    let fence: ShardFence;
    let discoveries: { ids: string[]; ahead: boolean }[];
    /** Set while a claim's reply is held: `reached` once it is, `release` lets it go on. */
    let hold: { reached: () => void; release?: () => void } | undefined;
    let claimer: DueClaimer;
    const start = (aheadMaxAgeMs: number) =>
      (claimer = new DueClaimer({
        db: t.db,
        planner: new DispatchPlanner(FLOW),
        prestageMs: 0,
        metrics: new Metrics(),
        log: silentLogger,
        clock: new DbClock(),
        aheadMaxAgeMs,
        // One tenant's jobs of one class: a run would claim them without the discovery ahead.
        runs: false,
        onDiscovery: (ids, ahead) => discoveries.push({ ids, ahead }),
        afterClaimReply: async () => {
          const h = hold;
          if (!h || h.release) return;
          await new Promise<void>((r) => {
            h.release = r;
            h.reached();
          });
        },
      }));

    beforeEach(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
      fence = await takeShards(t.db, "d1");
      discoveries = [];
      hold = undefined;
      start(60_000);
    });
    afterEach(async () => {
      hold?.release?.();
      await claimer.settle();
      await t.close();
    });

    const seed = (n: number) =>
      insertJobs(
        t.db,
        Array.from({ length: n }, (_, i) => newJob({ due_at: new Date(Date.now() - 60_000 + i) })),
      );
    const claim = (limit: number) => claimer.claim({ fence, limit, token: tokenOf(fence), ttlMs: 60_000 });
    /**
     * A claim whose reply is held once it has answered (the discovery ahead was sent beside
     * it and runs meanwhile), then let go: its rows.
     */
    const heldClaim = async (limit: number): Promise<ClaimRow[]> => {
      const reached = new Promise<void>((r) => (hold = { reached: r }));
      const claiming = claim(limit);
      await reached;
      hold!.release!();
      hold = undefined;
      return claiming;
    };

    test("the claim in flight's jobs are left out; the next pass uses the discovery made beside it and claims only unclaimed jobs", async () => {
      await seed(300);
      const got1 = await heldClaim(100);
      expect(got1).toHaveLength(100);
      expect(discoveries.map((d) => d.ahead)).toEqual([false]);

      const got2 = await claim(100);
      // One discovery for the second pass, and it was the one made ahead.
      expect(discoveries.map((d) => d.ahead)).toEqual([false, true]);
      const ahead = discoveries[1]!.ids;
      const mine = new Set(got1.map((j) => j.id));
      expect(ahead.filter((id) => mine.has(id))).toEqual([]);
      expect(ahead.length).toBeGreaterThanOrEqual(100);
      expect(got2).toHaveLength(100);
      expect(got2.filter((j) => mine.has(j.id))).toEqual([]);
      // Oldest first: the next 100 after the first claim's.
      const all = (await t.db.query<{ id: string; status: string }>("SELECT id, status FROM jobs ORDER BY due_at")).map((r) => r.id);
      expect(new Set(got2.map((j) => j.id))).toEqual(new Set(all.slice(100, 200)));
    });

    test("a job offered ahead and cancelled before the next claim is not claimed", async () => {
      await seed(300);
      await heldClaim(100);
      // The oldest job left: the discovery ahead offers it (it ran before this cancel).
      const [victim] = await t.db.query<{ id: string }>("SELECT id FROM jobs WHERE status = 'scheduled' ORDER BY due_at LIMIT 1");
      await t.db.query("UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1", [victim!.id]);
      const got2 = await claim(100);
      expect(discoveries.map((d) => d.ahead)).toEqual([false, true]);
      expect(discoveries[1]!.ids).toContain(victim!.id);
      expect(got2.map((j) => j.id)).not.toContain(victim!.id);
      expect(got2.length).toBeGreaterThan(90);
      expect((await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [victim!.id]))[0]!.status).toBe("cancelled");
    });

    test("a discovery ahead older than its maximum age is not used: the pass looks again", async () => {
      start(20);
      await seed(400);
      await claim(100);
      await Bun.sleep(60);
      expect(await claim(100)).toHaveLength(100);
      expect(discoveries.map((d) => d.ahead)).toEqual([false, false]);
    });

    test("a discovery ahead short of the next pass's limit is not used: the pass looks again", async () => {
      await seed(400);
      await claim(100);
      // Made for 100 (the last pass's limit), it has 100 candidates; this pass wants 150.
      expect(await claim(150)).toHaveLength(150);
      expect(discoveries.map((d) => d.ahead)).toEqual([false, false]);
      // And one big enough is used.
      expect(await claim(100)).toHaveLength(100);
      expect(discoveries.map((d) => d.ahead)).toEqual([false, false, true]);
    });

    test("a pass that took all there was starts no discovery ahead", async () => {
      await seed(50);
      const got = await claim(100);
      expect(got).toHaveLength(50);
      await seed(10);
      const got2 = await claim(100);
      expect(got2).toHaveLength(10);
      expect(discoveries.map((d) => d.ahead)).toEqual([false, false]);
    });
  });
}
