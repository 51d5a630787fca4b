// The candidate scan of each claim pass (SampleDue: each sampled tenant's oldest due jobs per
// priority class) reads about what it returns, however many jobs are due: the ordered scan of
// jobs_scheduled_tenant_class_id that stops at the limit. The planner chose a bitmap scan of
// every due job of the tenant and class and a sort instead, once statistics existed (it took
// the shard test, an expression without statistics, at 0.5 % and expected 1 row where 300
// were due); postgres.js plans a statement's first five runs on each connection with its
// parameters (custom plans), so each new connection paid it on its first five passes.
// With every shard held (one dispatcher, the usual case) the shard test is left out.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sampleDue } from "../../src/store/dispatch-queries.ts";
import { insertJobs } from "../../src/store/jobs.ts";
import { shardOfJob } from "../../src/store/shards.ts";
import { sql } from "../../src/store/sql.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";

const TENANTS = 64;
const PER_TENANT = 300;

type PlanNode = {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Sort Key"?: string[];
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  Plans?: PlanNode[];
};
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

for (const driver of DRIVERS) {
  describe(`the candidate scan with a backlog (${driver})`, () => {
    let t: TestDb;
    let jobs: { id: string; tenant: string }[] = [];
    beforeAll(async () => {
      t = await freshDb(driver);
      const due = Date.now() - 60_000;
      // Tenants interleaved, as jobs come in from many at once: a tenant's jobs are on many pages.
      for (let k = 0; k < PER_TENANT; k += 10) {
        const batch = Array.from({ length: TENANTS * 10 }, (_, i) =>
          newJob({ tenant: `t${String(i % TENANTS).padStart(2, "0")}`, due_at: new Date(due + k + Math.floor(i / TENANTS)) }),
        );
        await insertJobs(t.db, batch);
        jobs = jobs.concat(batch.map((j) => ({ id: j.id, tenant: j.tenant })));
      }
      // As autovacuum's analyze would have by then: the plans that went wrong came with statistics.
      await t.db.exec("ANALYZE jobs");
    }, 120_000);
    afterAll(() => t?.close());

    const shardCases = [
      { name: "the only shard", shards: { list: [0], count: 1 } },
      { name: "all 4 shards", shards: { list: [3, 1, 0, 2], count: 4 } },
      { name: "2 of 4 shards", shards: { list: [1, 2], count: 4 } },
    ];

    for (const c of shardCases) {
      test(`${c.name}: planned with its values (a connection's first runs) and generic, an ordered index scan that stops at the limit`, async () => {
        // As sampleDue sends them.
        const allShards = new Set(c.shards.list).size >= c.shards.count;
        // With nothing left out, and with the jobs a claim in flight takes (a look ahead).
        for (const exclude of [[], jobs.slice(0, 300).map((j) => j.id)])
          for (const mode of ["force_custom_plan", "force_generic_plan"]) {
            const params = ["", TENANTS, 2500, 500, 0, allShards ? null : c.shards.list, c.shards.count, exclude];
            const plan = await t.db.tx(async (q) => {
              await q.exec(`SET LOCAL plan_cache_mode = ${mode}`);
              await q.exec(`PREPARE sample_due_plan(text, int, int, int, float8, int[], int, uuid[]) AS ${sql("SampleDue")}`);
              try {
                const lit = params.map((p) => (p === null ? "NULL" : Array.isArray(p) ? `'{${p.join(",")}}'` : typeof p === "string" ? `'${p}'` : String(p)));
                const rows = await q.query<{ "QUERY PLAN": unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE sample_due_plan(${lit.join(", ")})`);
                const doc = rows[0]!["QUERY PLAN"];
                return ((typeof doc === "string" ? JSON.parse(doc) : doc) as { Plan: PlanNode }[])[0]!.Plan;
              } finally {
                await q.exec("DEALLOCATE sample_due_plan");
              }
            });
            const all = nodes(plan);
            const onJobs = all.filter((n) => n["Relation Name"] === "jobs");
            expect({ mode, excluded: exclude.length, bitmap: onJobs.filter((n) => n["Node Type"] === "Bitmap Heap Scan").length }).toEqual({
              mode,
              excluded: exclude.length,
              bitmap: 0,
            });
            expect({ mode, sortByDue: all.filter((n) => n["Node Type"] === "Sort" && n["Sort Key"]?.some((k) => k.includes("due_at"))).length }).toEqual({
              mode,
              sortByDue: 0,
            });
            const scans = onJobs.filter((n) => n["Node Type"] === "Index Scan" && n["Index Name"] === "jobs_scheduled_tenant_class_id");
            expect(scans.length).toBeGreaterThan(0);
          }
      });
    }

    test("what it returns: every due job of the held shards and no other, for some shards and for all", async () => {
      for (const shards of [
        { list: [1, 2], count: 4 },
        { list: [0, 2], count: 4 },
        { list: [3], count: 4 },
        { list: [0, 1, 2, 3], count: 4 },
      ]) {
        const s = await sampleDue(t.db, { cursor: "", tenants: TENANTS, budget: TENANTS * PER_TENANT, limit: PER_TENANT, horizonMs: 0, shards });
        const held = new Set(jobs.filter((j) => shards.list.includes(shardOfJob(j.id, shards.count))).map((j) => j.id));
        expect(s.candidates.length).toBe(held.size);
        for (const cand of s.candidates) expect(held.has(cand.id)).toBe(true);
      }
    });
  });
}
