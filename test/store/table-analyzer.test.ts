/**
 * TableAnalyzer: the leader analyzes a hot table once it has doubled since its last analyze,
 * so prepared statements are planned again for its real size (a generic plan made on an
 * empty `attempts` kept sequential scans through a whole first burst).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { TableAnalyzer } from "../../src/dispatcher/table-analyzer.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { insertJobs } from "../../src/store/jobs.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";
import { eventually } from "../helpers/target.ts";

const analyzed = async (t: TestDb) =>
  (
    await t.db.query<{ n: string; tuples: string }>(
      "SELECT s.analyze_count::text AS n, c.reltuples::bigint::text AS tuples FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = 'jobs'",
    )
  )[0]!;

describe("table analyzer (postgres)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await freshDb("postgres");
  });
  afterAll(() => t.close());

  test("a hot table that doubled is analyzed, once; a follower and a table that did not grow are left alone", async () => {
    let leader = false;
    const a = new TableAnalyzer({ db: t.db, log: silentLogger, isLeader: () => leader });
    await insertJobs(
      t.db,
      Array.from({ length: 3000 }, () => newJob()),
    );
    // The statistics collector counts the rows a moment after their commit.
    await eventually(
      async () => {
        const [r] = await t.db.query<{ n: string }>("SELECT n_live_tup::text AS n FROM pg_stat_user_tables WHERE relname = 'jobs'");
        return Number(r!.n) >= 3000;
      },
      15_000,
      "the row count in pg_stat_user_tables",
    );
    const before = await analyzed(t);
    await a.runOnce();
    expect(await analyzed(t)).toEqual(before); // not the leader
    leader = true;
    await a.runOnce();
    const after = await analyzed(t);
    expect(Number(after.tuples)).toBe(3000);
    // Not grown since: nothing more to do.
    await a.runOnce();
    expect((await analyzed(t)).tuples).toBe(after.tuples);
    expect((await analyzed(t)).n).toBe(after.n);
  }, 30_000);
});

describe("table analyzer (pglite)", () => {
  test("the embedded database is left to itself: one connection, nothing to plan again", async () => {
    const t = await freshDb("pglite");
    try {
      let asked = 0;
      const db = {
        ...t.db,
        query: async (...args: Parameters<typeof t.db.query>) => {
          asked++;
          return t.db.query(...args);
        },
      } as typeof t.db;
      await new TableAnalyzer({ db, log: silentLogger, isLeader: () => true }).runOnce();
      expect(asked).toBe(0);
    } finally {
      await t.close();
    }
  });
});
