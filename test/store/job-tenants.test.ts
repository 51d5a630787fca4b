// A tenant's jobs are listed through job_tenants (028), which triggers keep: one row a job,
// written with the job and removed with it, whatever statement wrote or removed it, and never
// touched by the delivery path. jobs has no index on tenant any more (every claim and
// completion entered it).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDueIds } from "../../src/store/dispatch-queries.ts";
import { insertJobs, listJobs, type ListFilter } from "../../src/store/jobs.ts";
import { migrate } from "../../src/store/migrate.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { pruneFinishedJobs } from "../../src/store/retention.ts";
import { completeAttempts } from "../../src/store/worker-queries.ts";
import { successOf } from "../helpers/completion.ts";
import { createDatabase, DRIVERS, dropDatabase, freshDb, migrateBefore, type TestDb } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

const ALL: Omit<ListFilter, "tenant"> = { status: null, scheduleId: null, dueBefore: null, dueAfter: null, afterId: null, limit: 1000 };

for (const driver of DRIVERS) {
  describe(`job_tenants (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(() => t?.close());

    const tenantRows = async (tenant: string) =>
      (await t.db.query<{ id: string }>("SELECT id::text AS id FROM job_tenants WHERE tenant = $1 ORDER BY id", [tenant])).map((r) => r.id);
    const ids = (rows: { id: string }[]) => rows.map((r) => r.id);

    test("jobs has no index on tenant alone: the delivery path's row versions do not enter one", async () => {
      const rows = await t.db.query<{ indexname: string; indexdef: string }>("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs'");
      expect(rows.length).toBeGreaterThan(5);
      expect(rows.map((r) => r.indexname)).not.toContain("jobs_tenant_id");
      // Every index on tenant is partial or unique over other columns (it is entered only in some states).
      for (const r of rows.filter((r) => /\(tenant[,)]/.test(r.indexdef))) expect(r.indexdef).toMatch(/WHERE|UNIQUE/);
    });

    test("a tenant's listing: its jobs only, in id order, either way, by pages, with filters", async () => {
      const a = Array.from({ length: 5 }, () => newJob({ tenant: "lt-a" }));
      const b = Array.from({ length: 4 }, () => newJob({ tenant: "lt-b" }));
      // Interleaved in one batch: the listing's order is the ids', not the insert's.
      await insertJobs(t.db, [a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3], a[4]]);
      const aIds = a.map((j) => j.id).sort();
      expect(ids(await listJobs(t.db, { ...ALL, tenant: "lt-a" }))).toEqual(aIds);
      expect(ids(await listJobs(t.db, { ...ALL, tenant: "lt-b" }))).toEqual(b.map((j) => j.id).sort());
      expect(ids(await listJobs(t.db, { ...ALL, tenant: "lt-a", newestFirst: true }))).toEqual([...aIds].reverse());
      // Pages of two, forward and back.
      const page2 = await listJobs(t.db, { ...ALL, tenant: "lt-a", afterId: aIds[1], limit: 2 });
      expect(ids(page2)).toEqual(aIds.slice(2, 4));
      const back = await listJobs(t.db, { ...ALL, tenant: "lt-a", afterId: aIds[3], limit: 2, newestFirst: true });
      expect(ids(back)).toEqual([aIds[2], aIds[1]]);
      // A filter on the job row: none of lt-a's jobs is dead; all are scheduled.
      expect(await listJobs(t.db, { ...ALL, tenant: "lt-a", status: "dead" })).toEqual([]);
      expect(ids(await listJobs(t.db, { ...ALL, tenant: "lt-a", status: "scheduled" }))).toEqual(aIds);
      // Every row carries the whole job.
      const [first] = await listJobs(t.db, { ...ALL, tenant: "lt-a", limit: 1 });
      expect(first).toMatchObject({ id: aIds[0], tenant: "lt-a", status: "scheduled" });
      expect(first.target.url).toBe("http://127.0.0.1:9/x");
      // An admin's listing (no tenant) still sees both.
      const every = ids(await listJobs(t.db, { ...ALL, tenant: null }));
      for (const id of [...aIds, ...b.map((j) => j.id)]) expect(every).toContain(id);
    });

    test("a job inserted by any statement is listed; deleted, truncated or pruned, it is gone from job_tenants", async () => {
      const id = Bun.randomUUIDv7();
      // Not through InsertJobs: a plain INSERT (a test's, a bench's, a future path's).
      await t.db.query(
        `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms)
         VALUES ($1, 'lt-raw', 'scheduled', now(), now(), '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}', 3, 1000, 60000, 5000)`,
        [id],
      );
      expect(ids(await listJobs(t.db, { ...ALL, tenant: "lt-raw" }))).toEqual([id]);
      await t.db.query("DELETE FROM jobs WHERE id = $1", [id]);
      expect(await tenantRows("lt-raw")).toEqual([]);
      expect(await listJobs(t.db, { ...ALL, tenant: "lt-raw" })).toEqual([]);

      // The pruner's delete (PruneFinishedJobs) removes them too.
      const old = Array.from({ length: 3 }, () => newJob({ tenant: "lt-prune" }));
      await insertJobs(t.db, old);
      await t.db.query("UPDATE jobs SET status = 'succeeded', finished_at = now() - interval '2 days' WHERE tenant = 'lt-prune'");
      expect(await tenantRows("lt-prune")).toHaveLength(3);
      expect(await pruneFinishedJobs(t.db, "succeeded", 86_400_000, 100)).toBeGreaterThanOrEqual(3);
      expect(await tenantRows("lt-prune")).toEqual([]);
    });

    test("claims and completions leave job_tenants untouched", async () => {
      const jobs = Array.from({ length: 4 }, () => newJob({ tenant: "lt-path" }));
      await insertJobs(t.db, jobs);
      const before = await t.db.query<{ id: string; x: string }>(
        "SELECT id::text AS id, xmin::text AS x FROM job_tenants WHERE tenant = 'lt-path' ORDER BY id",
      );
      expect(before).toHaveLength(4);
      const h = await takeShards(t.db, "disp");
      const claimed = await claimDueIds(t.db, {
        fence: h,
        limit: 4,
        token: tokenOf(h),
        ttlMs: 60_000,
        worker: "w1",
        ids: jobs.map((j) => j.id),
        startLimit: 4,
        attemptIds: jobs.map(() => Bun.randomUUIDv7()),
      });
      expect(claimed).toHaveLength(4);
      const done = await completeAttempts(
        t.db,
        "w1",
        claimed.map((c) => successOf({ job_id: c.id, gen: c.lease_generation, attempt_id: c.attempt_id! })),
      );
      expect(done.map((d) => d.status)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"]);
      // Same rows, same versions: nothing on the delivery path wrote them.
      const after = await t.db.query<{ id: string; x: string }>("SELECT id::text AS id, xmin::text AS x FROM job_tenants WHERE tenant = 'lt-path' ORDER BY id");
      expect(after).toEqual(before);
      expect(ids(await listJobs(t.db, { ...ALL, tenant: "lt-path", status: "succeeded" }))).toEqual(jobs.map((j) => j.id).sort());
    });

    test("a job's tenant cannot change", async () => {
      const [r] = await insertJobs(t.db, [newJob({ tenant: "lt-fixed" })]);
      await expect(t.db.query("UPDATE jobs SET tenant = 'lt-other' WHERE id = $1", [r.job.id])).rejects.toThrow(/tenant never changes/);
      // Naming the column without changing it is allowed.
      await t.db.query("UPDATE jobs SET tenant = tenant WHERE id = $1", [r.job.id]);
      expect(await tenantRows("lt-fixed")).toEqual([r.job.id]);
    });

    test("no BEFORE ROW UPDATE trigger on jobs, schedules or attempts: PostgreSQL would lock every row an update writes first (032)", async () => {
      // tgtype bits: 1 row, 2 before, 16 update.
      const rows = await t.db.query<{ tgname: string }>(
        `SELECT tgname FROM pg_trigger WHERE tgrelid IN ('jobs'::regclass, 'schedules'::regclass, 'attempts'::regclass)
           AND NOT tgisinternal AND tgtype & 1 = 1 AND tgtype & 2 = 2 AND tgtype & 16 = 16`,
      );
      expect(rows.map((r) => r.tgname)).toEqual([]);
      // The guards are still there, after the update.
      const guards = await t.db.query<{ tgname: string }>(
        "SELECT tgname FROM pg_trigger WHERE tgname IN ('jobs_tenant_fixed', 'schedules_tenant_fixed') AND tgtype & 2 = 0 ORDER BY tgname",
      );
      expect(guards.map((r) => r.tgname)).toEqual(["jobs_tenant_fixed", "schedules_tenant_fixed"]);
    });

    test("an update of jobs that leaves the tenant alone writes no more WAL records than the same update of a copy without triggers", async () => {
      // A BEFORE ROW UPDATE trigger (the guard before 032) cost a row lock record a row.
      const batch = Array.from({ length: 200 }, () => newJob({ tenant: "lt-wal" }));
      await insertJobs(t.db, batch);
      await t.db.exec("DROP TABLE IF EXISTS jobs_wal_copy");
      // The same columns and indexes; slot a plain column (its value is not updated either way).
      await t.db.exec("CREATE TABLE jobs_wal_copy (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)");
      const [opts] = await t.db.query<{ o: string | null }>("SELECT array_to_string(reloptions, ', ') AS o FROM pg_class WHERE relname = 'jobs'");
      if (opts?.o) await t.db.exec(`ALTER TABLE jobs_wal_copy SET (${opts.o})`);
      await t.db.exec("INSERT INTO jobs_wal_copy SELECT * FROM jobs WHERE tenant = 'lt-wal'");
      /**
       * The WAL records the update itself wrote (EXPLAIN's count for the statement: the other
       * test files' writes on a shared server do not enter it, as they would a WAL position).
       * due_at is in an index over these (scheduled) jobs: never a HOT update in either table.
       */
      const walRecords = async (table: string) => {
        const [row] = await t.db.query<Record<string, unknown>>(
          `EXPLAIN (ANALYZE, WAL, FORMAT JSON) UPDATE ${table} SET due_at = due_at + interval '1 second', updated_at = now() WHERE tenant = 'lt-wal'`,
        );
        const raw = Object.values(row!)[0];
        const plan = (typeof raw === "string" ? JSON.parse(raw) : raw) as { Plan: { "WAL Records": number } }[];
        return plan[0]!.Plan["WAL Records"];
      };
      try {
        const copy = await walRecords("jobs_wal_copy");
        const jobs = await walRecords("jobs");
        expect(copy).toBeGreaterThanOrEqual(2 * batch.length); // a heap record and index entries a row
        // With the lock: one record more a row (200). Index page splits may differ by a few.
        expect(jobs).toBeLessThan(copy + 20);
      } finally {
        await t.db.exec("DROP TABLE jobs_wal_copy");
      }
    });

    test("TRUNCATE jobs empties job_tenants", async () => {
      await insertJobs(t.db, [newJob({ tenant: "lt-trunc" })]);
      await t.db.exec("TRUNCATE jobs, attempts CASCADE");
      expect((await t.db.query<{ n: string }>("SELECT count(*)::text AS n FROM job_tenants"))[0].n).toBe("0");
    });
  });
}

describe("028 on a database with jobs (postgres)", () => {
  test("the jobs already there are listed by tenant after the migration", async () => {
    const url = await createDatabase();
    const db = openPostgres({ url, maxConnections: 2 });
    try {
      // Every migration before 028, as an older release left the database, then jobs in it.
      await migrateBefore(db, 28);
      const jobs = [newJob({ tenant: "old-a" }), newJob({ tenant: "old-b" }), newJob({ tenant: "old-a" })];
      await db.query(
        `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms)
         SELECT x.id, x.tenant, 'scheduled', now(), now(), '{"url":"http://127.0.0.1:9/x"}', 3, 1000, 60000, 5000
         FROM unnest($1::uuid[], $2::text[]) AS x(id, tenant)`,
        [jobs.map((j) => j.id), jobs.map((j) => j.tenant)],
      );
      expect((await migrate(db)).applied).toContain("028_job_tenants");
      const listed = await listJobs(db, { ...ALL, tenant: "old-a" });
      expect(listed.map((r) => r.id)).toEqual([jobs[0].id, jobs[2].id].sort());
    } finally {
      await db.close();
      await dropDatabase(url);
    }
  });
});
