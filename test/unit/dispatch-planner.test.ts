import { describe, expect, test } from "bun:test";
import { type Candidate, classOf, DispatchPlanner, type PlannerSettings } from "../../src/dispatcher/dispatch-planner.ts";
import { RateBucket } from "../../src/dispatcher/rate-bucket.ts";

const NOW = 1_000_000;
const base: PlannerSettings = { weights: { high: 8, normal: 3, low: 1 }, agingMs: 60_000, tenantDefault: {}, tenantOverrides: {} };
let n = 0;
const cand = (over: Partial<Candidate> = {}): Candidate => ({
  id: `j${String(n++).padStart(6, "0")}`,
  tenant: "t",
  priority: 0,
  dueMs: NOW - 10,
  catchup: false,
  ...over,
});
const many = (k: number, over: Partial<Candidate> = {}) => Array.from({ length: k }, (_, i) => cand({ dueMs: NOW - 1000 + i, ...over }));
const count = (cs: Candidate[], f: (c: Candidate) => boolean) => cs.filter(f).length;

describe("DispatchPlanner", () => {
  test("classes: priority sign, catch-up one lower, aging one higher per agingMs", () => {
    expect(classOf(cand({ priority: 5 }), NOW, 60_000)).toBe(2);
    expect(classOf(cand({ priority: 0 }), NOW, 60_000)).toBe(1);
    expect(classOf(cand({ priority: -3 }), NOW, 60_000)).toBe(0);
    expect(classOf(cand({ priority: 0, catchup: true }), NOW, 60_000)).toBe(0);
    expect(classOf(cand({ priority: -3, dueMs: NOW - 60_000 }), NOW, 60_000)).toBe(1);
    expect(classOf(cand({ priority: -3, dueMs: NOW - 120_000 }), NOW, 60_000)).toBe(2);
  });

  test("aging: low jobs raised into the top class go before high jobs just as late (one instant's burst)", () => {
    const p = new DispatchPlanner(base);
    const due = NOW - 2 * base.agingMs;
    // Created after the high ones: later ids, which used to break the tie against them.
    const highs = Array.from({ length: 50 }, () => cand({ priority: 10, dueMs: due }));
    const lows = Array.from({ length: 2 }, () => cand({ priority: -10, dueMs: due }));
    expect(lows.map((c) => classOf(c, NOW, base.agingMs))).toEqual([2, 2]);
    const picked = p.plan({ candidates: [...highs, ...lows], limit: 3, nowMs: NOW, inFlight: new Map() });
    expect(picked.map((c) => c.priority)).toEqual([-10, -10, 10]);
    // Still oldest first: a high job due earlier goes before them.
    const older = cand({ priority: 10, dueMs: due - 1 });
    expect(p.plan({ candidates: [...highs, ...lows, older], limit: 1, nowMs: NOW, inFlight: new Map() })).toEqual([older]);
  });

  test("weighted fair share: sustained high-priority load leaves low priority its share, never zero", () => {
    const p = new DispatchPlanner(base);
    const picked = p.plan({ candidates: [...many(500, { priority: 9 }), ...many(500, { priority: -9 })], limit: 90, nowMs: NOW, inFlight: new Map() });
    expect(picked).toHaveLength(90);
    // high:low = 8:1 when only those two have work
    expect(count(picked, (c) => c.priority < 0)).toBe(10);
    // within a class, oldest first
    const lows = picked.filter((c) => c.priority < 0).map((c) => c.dueMs);
    expect(lows).toEqual([...lows].sort((a, b) => a - b));
  });

  test("the share carries across passes: with room for two a pass, low priority still gets 1 in 9", () => {
    const p = new DispatchPlanner(base);
    const cands = [...many(500, { priority: 9 }), ...many(500, { priority: -9 })];
    const served: Candidate[] = [];
    for (let i = 0; i < 45; i++) {
      const got = p.plan({ candidates: cands.filter((c) => !served.includes(c)), limit: 2, nowMs: NOW, inFlight: new Map() });
      served.push(...got);
    }
    expect(count(served, (c) => c.priority < 0)).toBe(10);
  });

  test("all three classes share 8:3:1", () => {
    const p = new DispatchPlanner(base);
    const picked = p.plan({
      candidates: [...many(100, { priority: 1 }), ...many(100), ...many(100, { priority: -1 })],
      limit: 120,
      nowMs: NOW,
      inFlight: new Map(),
    });
    expect([count(picked, (c) => c.priority > 0), count(picked, (c) => c.priority === 0), count(picked, (c) => c.priority < 0)]).toEqual([80, 30, 10]);
  });

  test("tenants round robin: a flooding tenant does not crowd out one with a few jobs", () => {
    const p = new DispatchPlanner(base);
    const picked = p.plan({
      candidates: [...many(1000, { tenant: "flood" }), ...many(3, { tenant: "quiet", dueMs: NOW })],
      limit: 10,
      nowMs: NOW,
      inFlight: new Map(),
    });
    expect(count(picked, (c) => c.tenant === "quiet")).toBe(3);
  });

  test("round robin carries across passes: with room for one at a time, tenants alternate", () => {
    const p = new DispatchPlanner(base);
    const cands = [...many(10, { tenant: "a" }), ...many(10, { tenant: "b" }), ...many(10, { tenant: "c" })];
    const served: string[] = [];
    for (let i = 0; i < 6; i++) {
      const [c] = p.plan({ candidates: cands.filter((x) => !served.includes(x.id)), limit: 1, nowMs: NOW, inFlight: new Map() });
      served.push(c!.id);
    }
    expect(served.map((id) => cands.find((c) => c.id === id)!.tenant)).toEqual(["a", "b", "c", "a", "b", "c"]);
  });

  test("tenant max running: in-flight jobs count against it; overrides win over the default", () => {
    const p = new DispatchPlanner({ ...base, tenantDefault: { maxRunning: 5 }, tenantOverrides: { big: { maxRunning: 50 } } });
    const picked = p.plan({
      candidates: [...many(100, { tenant: "small" }), ...many(100, { tenant: "big" })],
      limit: 100,
      nowMs: NOW,
      inFlight: new Map([
        ["small", 3],
        ["big", 10],
      ]),
    });
    expect(count(picked, (c) => c.tenant === "small")).toBe(2);
    expect(count(picked, (c) => c.tenant === "big")).toBe(40);
  });

  test("tenant rate: a tenth of a second's worth at most, refilled as time passes; only what was claimed costs", () => {
    let t = 0;
    const p = new DispatchPlanner({ ...base, tenantDefault: { ratePerSec: 200 } }, () => t);
    const cands = many(1000, { tenant: "x" });
    const first = p.plan({ candidates: cands, limit: 500, nowMs: NOW, inFlight: new Map() });
    expect(first).toHaveLength(20);
    p.commit(first.slice(0, 15)); // five were not claimed after all (locked, changed)
    expect(p.plan({ candidates: cands, limit: 500, nowMs: NOW, inFlight: new Map() })).toHaveLength(5);
    t += 50;
    expect(p.plan({ candidates: cands, limit: 500, nowMs: NOW, inFlight: new Map() })).toHaveLength(15);
    t += 10_000;
    expect(p.plan({ candidates: cands, limit: 500, nowMs: NOW, inFlight: new Map() })).toHaveLength(20);
  });

  test("global rate caps the batch across tenants", () => {
    let t = 0;
    const p = new DispatchPlanner({ ...base, globalRatePerSec: 500 }, () => t);
    const cands = [...many(100, { tenant: "a" }), ...many(100, { tenant: "b" })];
    const got = p.plan({ candidates: cands, limit: 500, nowMs: NOW, inFlight: new Map() });
    expect(got).toHaveLength(50);
    expect(count(got, (c) => c.tenant === "a")).toBe(25);
    p.commit(got);
    expect(p.plan({ candidates: cands, limit: 500, nowMs: NOW, inFlight: new Map() })).toEqual([]);
    expect(p.msUntilGlobalToken()).toBe(2);
    t += 10;
    expect(p.plan({ candidates: cands, limit: 500, nowMs: NOW, inFlight: new Map() })).toHaveLength(5);
  });

  test("nothing to do: no candidates, no room", () => {
    const p = new DispatchPlanner(base);
    expect(p.plan({ candidates: [], limit: 10, nowMs: NOW, inFlight: new Map() })).toEqual([]);
    expect(p.plan({ candidates: many(5), limit: 0, nowMs: NOW, inFlight: new Map() })).toEqual([]);
  });
});

describe("RateBucket", () => {
  test("starts full (a tenth of a second's worth, at least one), refills continuously, never above that", () => {
    let t = 0;
    const b = new RateBucket(100, () => t);
    expect(b.available()).toBe(10);
    b.take(10);
    expect(b.available()).toBe(0);
    expect(b.msUntilToken()).toBe(10);
    t = 25;
    expect(b.available()).toBe(2);
    t = 10_000;
    expect(b.available()).toBe(10);
    const slow = new RateBucket(2, () => t);
    expect(slow.available()).toBe(1);
    slow.take(1);
    expect(slow.msUntilToken()).toBe(500);
    expect(() => new RateBucket(0)).toThrow("rate must be positive");
  });
});
