import { describe, expect, test } from "bun:test";
import { backoffDelay } from "../../src/worker/backoff.ts";

describe("backoffDelay", () => {
  test("the upper bound doubles per attempt until the cap", () => {
    const top = (attempt: number) => backoffDelay({ attempt, baseMs: 1000, maxMs: 60_000, random: () => 1 });
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(top)).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]);
  });

  test("random 0 gives 0 (full jitter reaches down to zero)", () => {
    expect(backoffDelay({ attempt: 5, baseMs: 1000, maxMs: 60_000, random: () => 0 })).toBe(0);
  });

  test("deterministic with an injected random", () => {
    expect(backoffDelay({ attempt: 3, baseMs: 1000, maxMs: 60_000, random: () => 0.5 })).toBe(2000);
    expect(backoffDelay({ attempt: 3, baseMs: 1000, maxMs: 60_000, random: () => 0.25 })).toBe(1000);
    expect(backoffDelay({ attempt: 10, baseMs: 1000, maxMs: 60_000, random: () => 0.5 })).toBe(30000);
  });

  test("huge attempts stay finite and capped", () => {
    for (const attempt of [60, 1024, 1100, 1e6, Number.MAX_SAFE_INTEGER]) {
      const d = backoffDelay({ attempt, baseMs: 1000, maxMs: 3_600_000, random: () => 1 });
      expect(Number.isFinite(d)).toBe(true);
      expect(d).toBe(3_600_000);
    }
  });

  test("zero base and bad inputs never give NaN", () => {
    expect(backoffDelay({ attempt: 2000, baseMs: 0, maxMs: 1000, random: () => 1 })).toBe(0);
    expect(backoffDelay({ attempt: NaN, baseMs: 100, maxMs: 1000, random: () => 1 })).toBe(100);
    expect(backoffDelay({ attempt: 0, baseMs: 100, maxMs: 1000, random: () => 1 })).toBe(100);
    expect(backoffDelay({ attempt: 3, baseMs: 100, maxMs: 1000, random: () => NaN })).toBe(0);
    expect(backoffDelay({ attempt: 3, baseMs: 100, maxMs: 1000, random: () => 7 })).toBe(400);
  });

  test("samples with Math.random spread within bounds", () => {
    const samples = Array.from({ length: 2000 }, () => backoffDelay({ attempt: 4, baseMs: 100, maxMs: 10_000 }));
    for (const s of samples) {
      expect(Number.isInteger(s)).toBe(true);
      expect(s).toBeGreaterThanOrEqual(0);
      expect(s).toBeLessThanOrEqual(800);
    }
    expect(new Set(samples).size).toBeGreaterThan(100);
    const lowHalf = samples.filter((s) => s < 400).length;
    // Uniform means about half below the midpoint; 2000 samples make 40 %–60 % a very safe band.
    expect(lowHalf).toBeGreaterThan(800);
    expect(lowHalf).toBeLessThan(1200);
  });
});
