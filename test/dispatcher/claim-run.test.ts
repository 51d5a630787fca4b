/**
 * Issue 15: a discovery whose due work is all one tenant's, of one priority sign (nothing for
 * the planner to decide), starts a run: until that discovery is AHEAD_MAX_AGE_MS old (set
 * per test here), passes claim the tenant's oldest due jobs of that sign straight away
 * (ClaimDueRun), with no discovery before each claim. Forced here:
 * - a run claims in due order what a discovery would have offered, and a short claim ends it;
 * - it never outlives its discovery's age: another tenant, or a higher class, that became due
 *   meanwhile is in the next discovery's plan;
 * - no run when the planner has something to decide (two tenants, two classes, a catch-up
 *   run, a tenant quota or a rate), and a run never claims a catch-up run or a replay;
 * - a run's claim that starts its jobs and gets no answer gives them back uncalled, without a try.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { DispatchPlanner, type PlannerSettings } from "../../src/dispatcher/dispatch-planner.ts";
import { DueClaimer } from "../../src/dispatcher/due-claimer.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { insertJobs, type NewJob } from "../../src/store/jobs.ts";
import type { ShardFence } from "../../src/store/shards.ts";
import type { ClaimRow } from "../../src/store/types.ts";
import { DbClock } from "../../src/time/db-clock.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

const FLOW: PlannerSettings = { weights: { high: 8, normal: 3, low: 1 }, agingMs: 600_000, tenantDefault: {}, tenantOverrides: {} };

for (const driver of DRIVERS) {
  describe(`claims of one tenant's run, no discovery before each (${driver})`, () => {
    let t: TestDb;
    let fence: ShardFence;
    let discoveries: number;
    let runs: string[][];
    let loseReply: ((jobs: ClaimRow[]) => boolean) | undefined;
    let claimer: DueClaimer;
    const start = (o: { maxAgeMs?: number; flow?: PlannerSettings } = {}) =>
      (claimer = new DueClaimer({
        db: t.db,
        planner: new DispatchPlanner(o.flow ?? FLOW),
        prestageMs: 0,
        metrics: new Metrics(),
        log: silentLogger,
        clock: new DbClock(),
        aheadMaxAgeMs: o.maxAgeMs ?? 60_000,
        onDiscovery: () => discoveries++,
        onRun: (ids) => runs.push(ids),
        afterClaimReply: async (jobs) => {
          if (loseReply?.(jobs)) throw new Error("test: connection lost before the reply");
        },
      }));

    beforeEach(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
      fence = await takeShards(t.db, "d1");
      discoveries = 0;
      runs = [];
      loseReply = undefined;
      start();
    });
    afterEach(async () => {
      await claimer.settle();
      await t.close();
    });

    /** n jobs due in the last minute, oldest first by i. */
    const seed = (n: number, over: Partial<NewJob> = {}, ageMs = 60_000) =>
      insertJobs(
        t.db,
        Array.from({ length: n }, (_, i) => newJob({ due_at: new Date(Date.now() - ageMs + i), ...over })),
      );
    const claim = (limit: number, more: { worker?: string; startLimit?: number } = {}) =>
      claimer.claim({ fence, limit, token: tokenOf(fence), ttlMs: 60_000, ...more });
    const dueOrder = async () => (await t.db.query<{ id: string }>("SELECT id FROM jobs ORDER BY due_at, id")).map((r) => r.id);
    const ids = (rows: ClaimRow[]) => rows.map((r) => r.id);

    test("after one discovery, passes claim the run's oldest jobs in due order, with no discovery; a short claim ends the run", async () => {
      await seed(250);
      const all = await dueOrder();
      expect(ids(await claim(100))).toEqual(all.slice(0, 100));
      expect([discoveries, runs.length]).toEqual([1, 0]);
      const second = await claim(100);
      expect(new Set(ids(second))).toEqual(new Set(all.slice(100, 200)));
      expect([discoveries, runs.length]).toEqual([1, 1]);
      // 50 left: the run's claim is short, and the pass finds the rest itself (none here).
      expect(new Set(ids(await claim(100)))).toEqual(new Set(all.slice(200)));
      expect(runs.map((r) => r.length)).toEqual([100, 50]);
      expect(discoveries).toBe(2);
      await seed(10);
      expect(await claim(100)).toHaveLength(10);
      // The run ended: that pass looked again.
      expect(runs).toHaveLength(2);
      expect(discoveries).toBe(3);
    });

    test("a run lives no longer than its discovery's age: another tenant due meanwhile is in the next pass's plan", async () => {
      start({ maxAgeMs: 20 });
      await seed(400);
      await claim(100);
      const other = await seed(40, { tenant: "zeta" });
      await Bun.sleep(60);
      const got = await claim(100);
      expect(runs).toHaveLength(0);
      expect(discoveries).toBe(2);
      // Round robin between the two tenants: every one of zeta's 40.
      const zeta = new Set(other.map((r) => r.job.id));
      expect(got.filter((j) => zeta.has(j.id))).toHaveLength(40);
      // Two tenants: nothing for a run; the next pass looks again.
      await claim(50);
      expect([discoveries, runs.length]).toEqual([3, 0]);
    });

    test("a run lives no longer than its discovery's age: a higher class due meanwhile goes first in the next pass", async () => {
      start({ maxAgeMs: 20 });
      await seed(400);
      await claim(100);
      const high = await seed(20, { priority: 5 }, 1000);
      await Bun.sleep(60);
      const got = await claim(30);
      expect(discoveries).toBe(2);
      const wanted = new Set(high.map((r) => r.job.id));
      expect(got.filter((j) => wanted.has(j.id))).toHaveLength(20);
    });

    const noRun: [string, () => Promise<unknown>, PlannerSettings?][] = [
      ["two tenants", () => Promise.all([seed(200), seed(200, { tenant: "zeta" })])],
      ["two priority classes", () => Promise.all([seed(200), seed(200, { priority: -1 })])],
      [
        "a catch-up run among the candidates",
        async () => {
          await seed(200);
          const [c] = await seed(1, {}, 120_000);
          await t.db.query("UPDATE jobs SET catchup_after = now() - interval '1 minute' WHERE id = $1", [c!.job.id]);
        },
      ],
      [
        "a replay among the candidates",
        async () => {
          await seed(200);
          await t.db.query("UPDATE jobs SET replay = true WHERE id = (SELECT id FROM jobs ORDER BY due_at LIMIT 1)");
        },
      ],
      ["the tenant's rate", () => seed(400), { ...FLOW, tenantOverrides: { default: { ratePerSec: 100_000 } } }],
      ["the tenant's running quota", () => seed(400), { ...FLOW, tenantDefault: { maxRunning: 100_000 } }],
      ["a global rate", () => seed(400), { ...FLOW, globalRatePerSec: 100_000 }],
    ];
    for (const [what, prepare, flow] of noRun) {
      test(`no run with ${what}: every pass looks`, async () => {
        if (flow) start({ flow });
        await prepare();
        await claim(50);
        await claim(50);
        expect(runs).toHaveLength(0);
        expect(discoveries).toBe(2);
      });
    }

    test("a run never claims a catch-up run or a replay: they wait for a discovery and the planner", async () => {
      await seed(150);
      const later = await seed(60, {}, 30_000);
      const catchup = later.slice(0, 30).map((r) => r.job.id);
      const replays = later.slice(30).map((r) => r.job.id);
      await t.db.query("UPDATE jobs SET catchup_after = now() - interval '1 minute' WHERE id = ANY($1::uuid[])", [catchup]);
      await t.db.query("UPDATE jobs SET replay = true WHERE id = ANY($1::uuid[])", [replays]);
      await claim(100);
      const second = await claim(100);
      expect(runs).toHaveLength(1);
      // The run's claim: the 50 plain jobs left, none of the later catch-up runs or replays.
      expect(runs[0]).toHaveLength(50);
      const special = new Set([...catchup, ...replays]);
      expect(runs[0]!.filter((id) => special.has(id))).toEqual([]);
      // The same pass found the rest with a discovery: the planner's to take.
      expect(second.length).toBeGreaterThan(50);
      expect(discoveries).toBe(2);
    });

    test("a run's claim that started its jobs and got no answer gives them back uncalled, without a try", async () => {
      await seed(300);
      const first = await claim(100, { worker: "w1", startLimit: 60 });
      expect(first.filter((j) => j.attempt_id !== null)).toHaveLength(60);
      let lost: ClaimRow[] = [];
      loseReply = (jobs) => {
        if (runs.length > 0 || lost.length > 0) return false;
        lost = jobs;
        return true;
      };
      await expect(claim(100, { worker: "w1", startLimit: 60 })).rejects.toThrow("connection lost");
      // It was a run's claim: it committed, started 60 of its 100, and they are given back.
      expect(lost).toHaveLength(100);
      const started = lost.filter((j) => j.attempt_id !== null);
      expect(started).toHaveLength(60);
      expect(new Set(started.map((j) => j.attempt_id)).size).toBe(60);
      const rows = await t.db.query<{ status: string; calls: number; lease_owner: string | null }>(
        "SELECT status, calls, lease_owner FROM jobs WHERE id = ANY($1::uuid[])",
        [started.map((j) => j.id)],
      );
      expect(rows.every((r) => r.status === "scheduled" && r.calls === 0 && r.lease_owner === null)).toBe(true);
      const [open] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM attempts WHERE id = ANY($1::uuid[])", [
        started.map((j) => j.attempt_id),
      ]);
      expect(Number(open!.n)).toBe(0);
      // A later pass claims them again (a discovery: the lost claim ended the run).
      const again = await claim(300, { worker: "w1", startLimit: 300 });
      const back = new Set(started.map((j) => j.id));
      expect(again.filter((j) => back.has(j.id))).toHaveLength(60);
    });

    test("a run's claim starts its jobs as ClaimDueIds does: the oldest startLimit, each with its own attempt", async () => {
      await seed(300);
      await claim(100, { worker: "w1", startLimit: 100 });
      const got = await claim(100, { worker: "w1", startLimit: 30 });
      expect(runs).toHaveLength(1);
      const started = got.filter((j) => j.attempt_id !== null);
      expect(started).toHaveLength(30);
      // The oldest 30 of the claim, in due order.
      const order = await dueOrder();
      const pos = (id: string) => order.indexOf(id);
      const sorted = [...got].sort((a, b) => pos(a.id) - pos(b.id));
      expect(new Set(started.map((j) => j.id))).toEqual(new Set(sorted.slice(0, 30).map((j) => j.id)));
      const attempts = await t.db.query<{ id: string; job_id: string; number: number; outcome: string | null }>(
        "SELECT id, job_id, number, outcome FROM attempts WHERE id = ANY($1::uuid[])",
        [started.map((j) => j.attempt_id)],
      );
      expect(attempts).toHaveLength(30);
      const byAttempt = new Map(started.map((j) => [j.attempt_id!, j.id]));
      for (const a of attempts) expect([a.job_id, a.number, a.outcome]).toEqual([byAttempt.get(a.id)!, 1, null]);
      for (const j of got) expect(j.calls).toBe(j.attempt_id === null ? 0 : 1);
    });
  });
}
