// int8 columns reach the code as numbers on both drivers (src/store/int8.ts): the job's
// durations and fencing token, read back by the claim and by the API's reads, are typed
// `number` once in store/, with no Number() at each use. One past 2^53 is refused, never rounded.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import { parseInt8 } from "../../src/store/int8.ts";
import { getJob } from "../../src/store/jobs.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";

test("parseInt8: exact integers as numbers; beyond 2^53 refused, not rounded", () => {
  expect(parseInt8("0")).toBe(0);
  expect(parseInt8("-42")).toBe(-42);
  expect(parseInt8("9007199254740991")).toBe(Number.MAX_SAFE_INTEGER);
  expect(() => parseInt8("9007199254740993")).toThrow(/9007199254740993/);
  expect(() => parseInt8("-9223372036854775808")).toThrow(RangeError);
});

for (const driver of DRIVERS) {
  describe(`int8 as numbers (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(() => t?.close());

    test("a job's ms columns and epoch, and an int8 the database computes, are numbers", async () => {
      const j = await insertJob(t.db);
      await t.db.query("UPDATE jobs SET epoch = 4294967297, timeout_ms = 604800000 WHERE id = $1", [j.id]);
      const row = (await getJob(t.db, j.id, null))!;
      expect(row.timeout_ms).toBe(604_800_000);
      expect(typeof row.backoff_base_ms).toBe("number");
      expect(typeof row.backoff_max_ms).toBe("number");
      expect(typeof row.window_ms).toBe("number");
      expect(row.epoch).toBe(4_294_967_297);
      const [c] = await t.db.query<{ n: unknown }>("SELECT count(*) AS n FROM jobs");
      expect(c!.n).toBe(1);
      // Parameters of int8 columns go out as before.
      const [p] = await t.db.query<{ v: unknown }>("SELECT $1::int8 AS v", [9_007_199_254_740_991]);
      expect(p!.v).toBe(Number.MAX_SAFE_INTEGER);
    });

    test("an int8 beyond 2^53 fails its query with the value named, and the connection serves the next one", async () => {
      await expect(t.db.query("SELECT 9223372036854775807::int8 AS v")).rejects.toThrow(/9223372036854775807/);
      const [r] = await t.db.query<{ v: unknown }>("SELECT 7::int8 AS v");
      expect(r!.v).toBe(7);
    });
  });
}
