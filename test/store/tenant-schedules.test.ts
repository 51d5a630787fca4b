/**
 * A tenant's schedules, counted by migration 030's triggers: the quota check of a creation
 * reads one row instead of counting the tenant's schedules (20 ms a creation with 100,000 of
 * them; bench/README.md, issue 15 part 24). The count must be exact through every way a
 * schedule is made or removed, or the quota lets too many in or refuses too early.
 */
import { describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import type { Db } from "../../src/store/db.ts";
import { migrate } from "../../src/store/migrate.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { deleteSchedule, insertSchedule } from "../../src/store/schedules.ts";
import { createDatabase, DRIVERS, describeDb, dropDatabase, migrateBefore } from "../helpers/db.ts";
import { pausedBefore } from "../helpers/paused-db.ts";
import { scheduleFields } from "../schedules/gen-support.ts";

const by = { actor: "test", reason: null };

/** The kept counts, and the true ones, of every tenant that has either. */
async function counts(db: Db): Promise<{ kept: Record<string, number>; real: Record<string, number> }> {
  const kept = await db.query<{ tenant: string; n: number }>("SELECT tenant, n::int AS n FROM tenant_schedules WHERE n > 0 ORDER BY tenant");
  const real = await db.query<{ tenant: string; n: number }>("SELECT tenant, count(*)::int AS n FROM schedules GROUP BY tenant ORDER BY tenant");
  const obj = (rows: { tenant: string; n: number }[]) => Object.fromEntries(rows.map((r) => [r.tenant, Number(r.n)]));
  return { kept: obj(kept), real: obj(real) };
}

/** `n` schedules of `tenant` in one statement, as a bench or an import would make them. */
async function bulk(db: Db, tenant: string, from: number, n: number): Promise<void> {
  await db.query(
    `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, misfire, catchup_window_ms, overlap)
     SELECT $1, 'b' || g, '0 9 * * *', 'UTC', '{"url":"http://127.0.0.1:9/x"}', 3, 1000, 60000, 5000, 'skip', 0, 'skip'
     FROM generate_series($2::int, $3::int) g`,
    [tenant, from, from + n - 1],
  );
}

for (const driver of DRIVERS) {
  describe(`a tenant's schedules, counted (${driver})`, () => {
    const t = describeDb(driver);

    test("creations, a repeated id, bulk inserts, deletes and TRUNCATE keep the count exact", async () => {
      for (const id of ["a1", "a2", "a3"]) expect(await insertSchedule(t.db, scheduleFields(id, { tenant: "ta" }), by)).toBeDefined();
      // A repeated id inserts nothing (409 in the API): nothing counted.
      expect(await insertSchedule(t.db, scheduleFields("a1", { tenant: "ta" }), by)).toBeUndefined();
      await bulk(t.db, "tb", 1, 250);
      await bulk(t.db, "ta", 1, 10);
      expect(await counts(t.db)).toEqual({ kept: { ta: 13, tb: 250 }, real: { ta: 13, tb: 250 } });

      expect(await deleteSchedule(t.db, "ta", "a2", by)).toBeDefined();
      expect(await deleteSchedule(t.db, "ta", "a2", by)).toBeUndefined();
      await t.db.query("DELETE FROM schedules WHERE tenant = 'tb' AND id LIKE 'b1%'"); // b1, b10–b19, b100–b199: 111
      expect(await counts(t.db)).toEqual({ kept: { ta: 12, tb: 139 }, real: { ta: 12, tb: 139 } });

      // A statement that inserts and one that fails leave it as it was.
      await expect(bulk(t.db, "ta", 1, 5)).rejects.toThrow(); // b1–b5 exist in ta
      expect((await counts(t.db)).kept).toEqual({ ta: 12, tb: 139 });

      await t.db.exec("TRUNCATE schedules");
      expect(await counts(t.db)).toEqual({ kept: {}, real: {} });
    });

    test("the quota holds against schedules made outside the API", async () => {
      await bulk(t.db, "tq", 1, 4);
      await expect(insertSchedule(t.db, scheduleFields("q5", { tenant: "tq" }), by, [], undefined, 5)).resolves.toBeDefined();
      await expect(insertSchedule(t.db, scheduleFields("q6", { tenant: "tq" }), by, [], undefined, 5)).rejects.toThrow(/has 5 schedules/);
      expect((await counts(t.db)).kept.tq).toBe(5);
    });

    test("a schedule's tenant never changes", async () => {
      await bulk(t.db, "tm", 1, 1);
      await expect(t.db.query("UPDATE schedules SET tenant = 'other' WHERE tenant = 'tm'")).rejects.toThrow(/tenant never changes/);
      expect((await counts(t.db)).kept.tm).toBe(1);
    });
  });
}

describe("the quota's last place, two creations at once (postgres)", () => {
  test("the one that counts second waits for the first to commit, sees it, and is refused", async () => {
    const url = await createDatabase({ migrated: true });
    const db = openPostgres({ url, maxConnections: 4 });
    try {
      await seedAuthority(db, "local");
      await bulk(db, "last", 1, 2);
      // A holds the last place: inserted and counted, stopped before its commit.
      let reached!: () => void;
      const atAudit = new Promise<void>((r) => (reached = r));
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const a = insertSchedule(pausedBefore(db, "InsertAudit", reached, gate), scheduleFields("a", { tenant: "last" }), by, [], undefined, 3);
      await atAudit;
      // B's insert waits on the count row A's insert holds; it must not pass the quota meanwhile.
      let bDone = false;
      const b = insertSchedule(db, scheduleFields("b", { tenant: "last" }), by, [], undefined, 3).finally(() => (bDone = true));
      await Bun.sleep(300);
      expect(bDone).toBe(false);
      release();
      expect(await a).toBeDefined();
      await expect(b).rejects.toThrow(/has 3 schedules/);
      expect(await counts(db)).toEqual({ kept: { last: 3 }, real: { last: 3 } });
    } finally {
      await db.close();
      await dropDatabase(url);
    }
  });
});

describe("030 on a database with schedules (postgres)", () => {
  test("the counts start from the schedules there are", async () => {
    const url = await createDatabase();
    const db = openPostgres({ url, maxConnections: 2 });
    try {
      await migrateBefore(db, 30);
      await bulk(db, "x", 1, 7);
      await bulk(db, "y", 1, 2);
      expect((await migrate(db)).applied).toContain("030_tenant_schedules");
      expect(await counts(db)).toEqual({ kept: { x: 7, y: 2 }, real: { x: 7, y: 2 } });
    } finally {
      await db.close();
      await dropDatabase(url);
    }
  });
});
