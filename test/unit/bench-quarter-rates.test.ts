import { describe, expect, test } from "bun:test";
import { countsPerStep, quarterRates } from "../../bench/lib/stats.ts";

// bench:peers' herd rows (README "peers"): a drain at one rate must read as four equal figures,
// and a drain that slows down must show it in its last quarter.
describe("quarterRates", () => {
  test("calls every 2 ms: 500/s in every quarter", () => {
    const at = Array.from({ length: 400 }, (_, i) => 1000 + i * 2);
    const r = quarterRates(at)!;
    expect(r).toHaveLength(4);
    for (const x of r) expect(x).toBeCloseTo(500, 6);
  });

  test("a drain that slows to half its rate in its second half", () => {
    const at: number[] = [];
    for (let i = 0; i < 200; i++) at.push(i); // 1000/s
    for (let i = 0; i < 200; i++) at.push(200 + i * 2); // 500/s
    const r = quarterRates(at)!;
    expect(r[0]).toBeCloseTo(1000, 6);
    expect(r[3]).toBeCloseTo(500, 6);
  });

  test("too few calls for four quarters: none", () => {
    expect(quarterRates([1, 2, 3, 4, 5, 6, 7])).toBeUndefined();
  });
});

describe("countsPerStep", () => {
  test("instants counted in each step from the start, empty steps as 0, earlier ones in the first", () => {
    expect(countsPerStep([990, 1000, 1100, 1499, 1500, 2600], 1000, 500)).toEqual([4, 1, 0, 1]);
  });

  test("no instants: no steps", () => {
    expect(countsPerStep([], 0, 500)).toEqual([]);
  });
});
