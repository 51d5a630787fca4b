/**
 * claimable(start_by, calls) (025_claimable.sql): the one definition of "this job may start"
 * that every claim and the last check before a call use. It must mean what the condition
 * written out meant, and the planner must inline it, or the claims would plan differently
 * (a function call is opaque to it: no index condition, a guessed selectivity).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";

const QUERIES = join(import.meta.dir, "../../sql/queries");

for (const driver of DRIVERS) {
  describe(`claimable (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
    });
    afterAll(() => t.close());

    test("no start-by, a start-by not yet passed, or a call already made: claimable; a passed start-by before any call: not", async () => {
      const [r] = await t.db.query<Record<string, boolean>>(`SELECT
        claimable(NULL, 0) AS none, claimable(now() + interval '1 s', 0) AS ahead,
        claimable(now(), 0) AS at_now, claimable(now() - interval '1 s', 0) AS passed,
        claimable(now() - interval '1 s', 1) AS retry`);
      expect(r).toEqual({ none: true, ahead: true, at_now: false, passed: false, retry: true });
    });

    test("inlined: a plan shows the condition itself, never a call of the function", async () => {
      const rows = await t.db.query<Record<string, string>>(
        "EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM jobs WHERE status = 'scheduled' AND claimable(start_by, calls)",
      );
      const plan = rows.map((r) => Object.values(r)[0]).join("\n");
      expect(plan).toContain("start_by IS NULL");
      expect(plan).not.toContain("claimable(");
    });

    test("STABLE (it reads now()), not SECURITY DEFINER, no SET: what inlining needs", async () => {
      const [p] = await t.db.query<{ provolatile: string; prosecdef: boolean; proconfig: string[] | null; lang: string }>(
        "SELECT provolatile, prosecdef, proconfig, (SELECT lanname FROM pg_language WHERE oid = prolang) AS lang FROM pg_proc WHERE proname = 'claimable'",
      );
      expect(p).toEqual({ provolatile: "s", prosecdef: false, proconfig: null, lang: "sql" });
    });
  });
}

test("no named query writes the claimable condition out again", () => {
  for (const f of readdirSync(QUERIES).filter((n) => n.endsWith(".sql"))) {
    const text = readFileSync(join(QUERIES, f), "utf8");
    expect({ f, found: /start_by\s*>\s*now\(\)/.test(text) }).toEqual({ f, found: false });
  }
});
