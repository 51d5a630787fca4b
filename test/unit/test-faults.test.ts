// The test-only fault seam (SCHEDULER_TEST_FAULTS): its parsing refuses bad input with one
// line naming the variable, and an injected fault is a real server error with the SQLSTATE
// it names, raised in the caller's own transaction (which it aborts), on both drivers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ConfigError, loadConfig } from "../../src/config.ts";
import type { Runtime } from "../../src/runtime.ts";
import { sql } from "../../src/store/sql.ts";
import { FaultSwitch, withTestFaults } from "../../src/store/test-faults.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { memoryLogger } from "../helpers/log.ts";
import { scrape, series } from "../helpers/metrics.ts";
import { startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";

const parse = (v: string) => loadConfig({ SCHEDULER_TEST_FAULTS: v }).testFaults;

function refusal(v: string): string {
  try {
    parse(v);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`SCHEDULER_TEST_FAULTS=${v} was accepted`);
}

describe("SCHEDULER_TEST_FAULTS parsing", () => {
  test("accepts the documented form, and nothing set means no faults", () => {
    expect(parse("ExpireCoalesced=40P01@0.2, CompleteAttempts=55P03@0.05")).toEqual([
      { query: "ExpireCoalesced", code: "40P01", probability: 0.2 },
      { query: "CompleteAttempts", code: "55P03", probability: 0.05 },
    ]);
    expect(parse("DueSchedules=57014@1")).toEqual([{ query: "DueSchedules", code: "57014", probability: 1 }]);
    expect(loadConfig({}).testFaults).toEqual([]);
  });

  test.each([
    ["ExpireCoalesced", /must be Name=SQLSTATE@probability/],
    ["ExpireCoalesced=40P01", /must be Name=SQLSTATE@probability/],
    ["NoSuchQuery=40P01@0.5", /NoSuchQuery is not a query name/],
    ["ExpireCoalesced=40p01@0.5", /SQLSTATE "40p01" must be 5 characters 0-9 or A-Z/],
    ["ExpireCoalesced=4P01@0.5", /SQLSTATE "4P01" must be 5 characters/],
    ["ExpireCoalesced=40P01X@0.5", /SQLSTATE "40P01X" must be 5 characters/],
    ["ExpireCoalesced=00000@0.5", /SQLSTATE 00000 is not an error/],
    ["ExpireCoalesced=40P01@1.5", /probability "1.5" must be a number from 0 to 1/],
    ["ExpireCoalesced=40P01@-0.1", /probability "-0.1" must be a number from 0 to 1/],
    ["ExpireCoalesced=40P01@", /probability "" must be a number from 0 to 1/],
    ["ExpireCoalesced=40P01@0.1,ExpireCoalesced=55P03@0.1", /ExpireCoalesced is listed twice/],
  ])("refuses %p with one line naming the variable", (value, why) => {
    const msg = refusal(value);
    expect(msg).toStartWith("SCHEDULER_TEST_FAULTS ");
    expect(msg).toMatch(why);
    expect(msg).not.toContain("\n");
  });
});

describe("SCHEDULER_TEST_FAULTS_ARMED", () => {
  const armed = (env: Record<string, string>) => loadConfig(env).testFaultsArmed;
  test("armed unless 0; 0 or 1 only, and only with faults to arm", () => {
    expect(armed({ SCHEDULER_TEST_FAULTS: "NextFireAt=40P01@1" })).toBe(true);
    expect(armed({ SCHEDULER_TEST_FAULTS: "NextFireAt=40P01@1", SCHEDULER_TEST_FAULTS_ARMED: "1" })).toBe(true);
    expect(armed({ SCHEDULER_TEST_FAULTS: "NextFireAt=40P01@1", SCHEDULER_TEST_FAULTS_ARMED: "0" })).toBe(false);
    expect(() => armed({ SCHEDULER_TEST_FAULTS: "NextFireAt=40P01@1", SCHEDULER_TEST_FAULTS_ARMED: "no" })).toThrow(
      /SCHEDULER_TEST_FAULTS_ARMED must be 0 or 1/,
    );
    expect(() => armed({ SCHEDULER_TEST_FAULTS_ARMED: "0" })).toThrow(/without SCHEDULER_TEST_FAULTS/);
  });
});

for (const driver of DRIVERS) {
  describe(`an injected fault is a real server error (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
    });
    afterAll(async () => {
      await t?.close();
    });

    test("the named query fails with the SQLSTATE it names; other queries are untouched", async () => {
      const injected: string[] = [];
      const db = withTestFaults(t.db, [{ query: "NextFireAt", code: "40P01", probability: 1 }], { onInject: (q, c) => injected.push(`${q}:${c}`) });
      const err = await db.query(sql("NextFireAt"), [0, null, 1, 1, null]).then(
        () => undefined,
        (e) => e,
      );
      expect(err?.code).toBe("40P01");
      expect(String(err?.message)).toContain("injected fault");
      expect(injected).toEqual(["NextFireAt:40P01"]);
      // Not named, or named but not listed: no fault.
      expect(await db.query("SELECT 1 AS one")).toEqual([{ one: 1 }]);
      expect(await db.query(sql("IndexEarliestDue"))).toEqual([]);
      expect(injected).toHaveLength(1);
    });

    test("inside a transaction it aborts that transaction, as a real deadlock does", async () => {
      const db = withTestFaults(t.db, [{ query: "NextFireAt", code: "55P03", probability: 1 }]);
      await t.db.query("CREATE TABLE fault_probe (x int)");
      let first: any;
      let after: any;
      await db
        .tx(async (q) => {
          await q.query("INSERT INTO fault_probe VALUES (1)");
          first = await q.query(sql("NextFireAt"), [0, null, 1, 1, null]).then(
            () => undefined,
            (e) => e,
          );
          // The transaction is aborted: nothing else runs in it, and nothing of it commits.
          after = await q.query("SELECT 1").then(
            () => undefined,
            (e) => e,
          );
        })
        .catch(() => {});
      expect(first?.code).toBe("55P03");
      expect(after?.code).toBe("25P02");
      expect(await t.db.query("SELECT count(*)::int AS n FROM fault_probe")).toEqual([{ n: 0 }]);
    });

    test("a disarmed switch injects nothing; toggled, the same db fails again", async () => {
      const sw = new FaultSwitch(false);
      const db = withTestFaults(t.db, [{ query: "NextFireAt", code: "40P01", probability: 1 }], { switch: sw });
      expect(
        await db.query(sql("NextFireAt"), [0, null, 1, 1, null]).then(
          () => "ok",
          (e) => e.code,
        ),
      ).toBe("ok");
      expect(sw.toggle()).toBe(true);
      expect(
        await db.query(sql("NextFireAt"), [0, null, 1, 1, null]).then(
          () => "ok",
          (e) => e.code,
        ),
      ).toBe("40P01");
      expect(sw.toggle()).toBe(false);
      expect(
        await db.query(sql("NextFireAt"), [0, null, 1, 1, null]).then(
          () => "ok",
          (e) => e.code,
        ),
      ).toBe("ok");
    });

    test("the probability is honoured: 0 never, and each call draws once", async () => {
      const never = withTestFaults(t.db, [{ query: "NextFireAt", code: "40001", probability: 0 }]);
      for (let i = 0; i < 5; i++) await never.query(sql("NextFireAt"), [0, null, 1, 1, null]);
      const draws = [0.9, 0.1, 0.5, 0.49];
      const db = withTestFaults(t.db, [{ query: "NextFireAt", code: "40001", probability: 0.5 }], { random: () => draws.shift()! });
      const results = [];
      for (let i = 0; i < 4; i++)
        results.push(
          await db.query(sql("NextFireAt"), [0, null, 1, 1, null]).then(
            () => "ok",
            (e) => e.code,
          ),
        );
      expect(results).toEqual(["ok", "40001", "ok", "40001"]);
    });
  });
}

describe("through a running scheduler (pglite)", () => {
  let t: TestDb;
  let rt: Runtime | undefined;
  const mem = memoryLogger("warn");
  beforeAll(async () => {
    t = await freshDb("pglite");
  });
  afterAll(async () => {
    await rt?.stop();
    await t?.close();
  });

  test("one warn line at start, and every injected fault counted by query and code", async () => {
    rt = await startScheduler(t.db, { SCHEDULER_TEST_FAULTS: "NextFireAt=57014@1" }, { log: mem.log });
    expect(mem.find("SCHEDULER_TEST_FAULTS is set")).toHaveLength(1);
    const n = await eventually(
      async () => {
        const m = await scrape(rt!.url!);
        const v = m.get('scheduler_test_faults_injected_total{query="NextFireAt",code="57014"}') ?? 0;
        return v >= 2 ? v : 0;
      },
      10_000,
      "injected faults counted",
    );
    expect(n).toBeGreaterThanOrEqual(2);
    // It still serves: the seam breaks only the named query.
    expect(series(await scrape(rt.url!), "scheduler_region_home")).toBe(1);
  });
});
