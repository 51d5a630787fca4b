// Discovery is one statement (SampleDue): the tenant sample after the cursor, wrapping round
// to the first names, and each sampled tenant's oldest due jobs per priority class. The
// dispatcher's next cursor is the sample's last tenant when the sample was full, so with
// more tenants than a pass samples, every tenant comes round.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sampleDue } from "../../src/store/dispatch-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, newJob } from "../helpers/jobs.ts";
import { insertJobs } from "../../src/store/jobs.ts";

const ALL = { list: [0], count: 1 };
const name = (i: number) => `t${String(i).padStart(2, "0")}`;

for (const driver of DRIVERS) {
  describe(`one-statement discovery (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
    });
    afterAll(() => t?.close());

    const sample = (cursor: string, tenants: number, budget = 40, limit = 10) => sampleDue(t.db, { cursor, tenants, budget, limit, horizonMs: 0, shards: ALL });

    test("nothing scheduled: no candidate, an empty sample", async () => {
      expect(await sample("", 64)).toEqual({ candidates: [], sampled: 0, lastTenant: null });
    });

    test("70 tenants, 64 a pass: the cursor wraps round and every tenant is sampled", async () => {
      const due = new Date(Date.now() - 1000);
      await insertJobs(
        t.db,
        Array.from({ length: 70 }, (_, i) => newJob({ tenant: name(i), due_at: due })),
      );
      const first = await sample("", 64);
      expect(first.sampled).toBe(64);
      expect(first.lastTenant).toBe(name(63));
      expect(new Set(first.candidates.map((c) => c.tenant))).toEqual(new Set(Array.from({ length: 64 }, (_, i) => name(i))));
      // After t63: t64..t69, then round to t00..t57.
      const second = await sample(first.lastTenant!, 64);
      expect(second.sampled).toBe(64);
      expect(second.lastTenant).toBe(name(57));
      const seen = new Set([...first.candidates, ...second.candidates].map((c) => c.tenant));
      expect(seen.size).toBe(70);
      expect(second.candidates.some((c) => c.tenant === name(69))).toBe(true);
      expect(second.candidates.some((c) => c.tenant === name(60))).toBe(false);
    });

    test("the wrap-around fills the sample after the cursor's followers, each tenant once", async () => {
      // t68, t69, then round to t00..t61.
      const s = await sample(name(67), 64);
      const tenants = s.candidates.map((c) => c.tenant);
      expect(new Set(tenants).size).toBe(tenants.length);
      expect(s.sampled).toBe(64);
      expect(s.lastTenant).toBe(name(61));
      // A sample larger than the tenants: the wrap reaches the cursor's followers again, each counted once.
      const few = await sample(name(67), 100);
      expect(few.sampled).toBe(70);
      expect(new Set(few.candidates.map((c) => c.tenant)).size).toBe(70);
    });

    test("per tenant and class: the budget shared by the tenants sampled, at least 16, at most the limit; oldest first; only what is due", async () => {
      const now = Date.now();
      await insertJobs(t.db, [
        ...Array.from({ length: 30 }, (_, i) => newJob({ tenant: "zz-big", due_at: new Date(now - 60_000 + i * 100) })),
        ...Array.from({ length: 5 }, (_, i) => newJob({ tenant: "zz-big", priority: 5, due_at: new Date(now - 1000 - i) })),
      ]);
      const later = await insertJob(t.db, { tenant: "zz-big", due_at: new Date(now + 60_000) });
      // Only zz-big after "zz": one tenant, budget 400 → the limit (20) per class.
      const one = await sampleDue(t.db, { cursor: "zz", tenants: 1, budget: 400, limit: 20, horizonMs: 0, shards: ALL });
      expect(one.sampled).toBe(1);
      const normal = one.candidates.filter((c) => c.priority === 0);
      const high = one.candidates.filter((c) => c.priority === 5);
      expect(normal).toHaveLength(20);
      expect(high).toHaveLength(5);
      const dues = normal.map((c) => c.due_at.getTime());
      expect(dues).toEqual([...dues].sort((a, b) => a - b));
      expect(one.candidates.some((c) => c.id === later.id)).toBe(false);
      // A budget smaller than 16 a tenant still gives 16 (room for the planner to choose).
      const floor = await sampleDue(t.db, { cursor: "zz", tenants: 1, budget: 4, limit: 100, horizonMs: 0, shards: ALL });
      expect(floor.candidates.filter((c) => c.priority === 0)).toHaveLength(16);
      // Within the pre-staging horizon the later job is a candidate too.
      const staged = await sampleDue(t.db, { cursor: "zz", tenants: 1, budget: 400, limit: 100, horizonMs: 120_000, shards: ALL });
      expect(staged.candidates.some((c) => c.id === later.id)).toBe(true);
    });

    test("jobs left out (a claim in flight takes them) are never offered, though still scheduled; the next oldest are", async () => {
      // zz-big's 30 normal jobs from the test above, still scheduled: leave out the 10 oldest.
      const before = await sampleDue(t.db, { cursor: "zz", tenants: 1, budget: 400, limit: 20, horizonMs: 0, shards: ALL });
      const normal = before.candidates.filter((c) => c.priority === 0).map((c) => c.id);
      expect(normal).toHaveLength(20);
      const out = normal.slice(0, 10);
      const after = await sampleDue(t.db, { cursor: "zz", tenants: 1, budget: 400, limit: 20, horizonMs: 0, shards: ALL, exclude: out });
      const offered = after.candidates.filter((c) => c.priority === 0).map((c) => c.id);
      expect(offered.filter((id) => out.includes(id))).toEqual([]);
      expect(offered).toHaveLength(20);
      expect(offered.slice(0, 10)).toEqual(normal.slice(10));
      const left = await t.db.query<{ n: number | string }>("SELECT count(*) AS n FROM jobs WHERE id = ANY($1::uuid[]) AND status = 'scheduled'", [out]);
      expect(Number(left[0]!.n)).toBe(10);
    });
  });
}
