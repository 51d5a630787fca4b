import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Queryable } from "../../src/store/db.ts";
import { DbClock } from "../../src/time/db-clock.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";

// The offset to the database's clock, measured against a real PostgreSQL. A reading whose
// answer this process handles late (a busy event loop at start-up on a loaded machine) is
// forced by holding one answer back before the clock sees it.

describe("DbClock (postgres)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await freshDb("postgres");
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The database's offset from the process clock, from the quickest of many readings. */
  async function trueOffset(): Promise<number> {
    let best = { rtt: Number.POSITIVE_INFINITY, offset: 0 };
    for (let i = 0; i < 20; i++) {
      const sent = performance.now();
      const [{ now }] = await t.db.query<{ now: Date }>("SELECT clock_timestamp() AS now");
      const offset = new Date(now).getTime() - Date.now();
      const rtt = performance.now() - sent;
      if (rtt < best.rtt) best = { rtt, offset };
    }
    return best.offset;
  }

  /** The test database, with the answer to reading number `slow` (1-based) held `ms`. */
  function holdingAnswer(slow: number, ms: number): Queryable & { reads: number } {
    const q = {
      reads: 0,
      query: async <T>(text: string, params?: unknown[]) => {
        const rows = await t.db.query<T>(text, params);
        if (++q.reads === slow) await Bun.sleep(ms);
        return rows;
      },
      exec: (text: string) => t.db.exec(text),
    };
    return q;
  }

  test("one reading answered late does not make the clock read behind: wake-ups planned on it are not late by the pause", async () => {
    const truth = await trueOffset();
    for (const slow of [1, 2]) {
      const db = holdingAnswer(slow, 300);
      const clock = new DbClock(db);
      await clock.sync();
      expect(db.reads).toBeGreaterThanOrEqual(2);
      // The held reading alone would put the clock 300 ms behind the database; the others are
      // quick, but on a starved machine not instant.
      expect(Math.abs(clock.now() - Date.now() - truth)).toBeLessThan(150);
    }
  });

  test("never ahead of the database: its reading is at most the database's now", async () => {
    const clock = new DbClock(t.db);
    await clock.sync();
    for (let i = 0; i < 5; i++) {
      const before = clock.now();
      const [{ now }] = await t.db.query<{ now: Date }>("SELECT clock_timestamp() AS now");
      expect(before).toBeLessThanOrEqual(new Date(now).getTime() + 1);
    }
  });
});
