// Every named query in sql/queries is used by the code: a query nothing calls any more (its
// caller replaced, as LockDispatchLease was by LockShards) reads as a rule still enforced
// when it is not, and is left to drift from the schema unnoticed. And only src/store runs them.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseNamedQueries, sql } from "../../src/store/sql.ts";

const ROOT = join(import.meta.dir, "../..");

describe("named queries", () => {
  const queryDir = join(ROOT, "sql/queries");
  const names: string[] = [];
  let queryText = "";
  for (const f of readdirSync(queryDir).filter((f) => f.endsWith(".sql"))) {
    const text = readFileSync(join(queryDir, f), "utf8");
    names.push(...parseNamedQueries(text).keys());
    queryText += text;
  }
  const src = join(ROOT, "src");
  const source = [...new Bun.Glob("**/*.ts").scanSync(src)].map((f) => readFileSync(join(src, f), "utf8")).join("\n");

  test("the scan sees the queries and the code", () => {
    expect(names.length).toBeGreaterThan(100);
    expect(source).toContain('"StartAttempts"');
  });

  test("every named query is used by src/ (by its name as a string literal), every fragment (_X) by a query", () => {
    const unused = names.filter((n) => (n.startsWith("_") ? !queryText.includes(`-- use: ${n}\n`) : !source.includes(`"${n}"`)));
    expect(unused).toEqual([]);
  });

  test("a fragment's text stands where a query uses it", () => {
    for (const name of ["ClaimDueIds", "ClaimDueRun"]) {
      const text = sql(name);
      expect(text).not.toContain("-- use:");
      expect(text).toContain("INSERT INTO attempts");
      expect(text.indexOf("), due AS (")).toBeLessThan(text.indexOf("), pick AS ("));
    }
  });

  // Queries run through the named functions of src/store only: one place maps each query's
  // rows to typed values, and a reader finds every statement a table sees in one folder.
  test("only src/store runs named queries (no import of store/sql.ts elsewhere)", () => {
    const files = [...new Bun.Glob("**/*.ts").scanSync(src)].filter((f) => !f.startsWith("store/"));
    expect(files.length).toBeGreaterThan(100);
    const outside = files.filter((f) => /from\s+["'][./]*(\.\.\/)?store\/sql\.ts["']/.test(readFileSync(join(src, f), "utf8")));
    expect(outside).toEqual([]);
  });
});
