import { describe, expect, test } from "bun:test";
import { DurationError, formatDuration, parseDuration } from "../../src/time/duration.ts";

describe("parseDuration", () => {
  const ok: [string | number, number][] = [
    ["250ms", 250],
    ["30s", 30_000],
    ["5m", 300_000],
    ["2h", 7_200_000],
    ["1d", 86_400_000],
    ["0s", 0],
    ["0", 0],
    ["1500", 1500],
    [" 30s ", 30_000],
    [0, 0],
    [1500, 1500],
    [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
    [String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
  ];
  for (const [input, ms] of ok) test(`${JSON.stringify(input)} → ${ms}`, () => expect(parseDuration(input)).toBe(ms));

  const bad: (string | number)[] = [
    "",
    "  ",
    "-5s",
    "-1",
    -1,
    1.5,
    "1.5s",
    "1.5",
    "5x",
    "5 s",
    "s",
    "1h30m",
    "5M",
    "5S",
    "1w",
    "abc",
    NaN,
    Infinity,
    -Infinity,
    "9007199254740992",
    "104249991375d",
    Number.MAX_SAFE_INTEGER + 1,
    "1e3",
    "0x10",
  ];
  for (const input of bad) {
    test(`rejects ${JSON.stringify(input)}`, () => {
      expect(() => parseDuration(input)).toThrow(DurationError);
    });
  }

  test("the message names the input and the accepted forms", () => {
    try {
      parseDuration("5 minutes");
      throw new Error("should have thrown");
    } catch (e) {
      expect(e).toBeInstanceOf(DurationError);
      expect((e as Error).message).toContain('"5 minutes"');
      expect((e as Error).message).toContain("250ms, 30s, 5m, 2h, 1d");
      expect((e as Error).message).toContain("integer milliseconds");
    }
  });

  test("the message says why for negatives, empties and overflow", () => {
    expect(() => parseDuration("-5s")).toThrow(/negative/);
    expect(() => parseDuration("")).toThrow(/empty/);
    expect(() => parseDuration("104249991375d")).toThrow(/too large/);
  });

  test("the largest safe number of days is accepted", () => {
    const days = Math.floor(Number.MAX_SAFE_INTEGER / 86_400_000);
    expect(parseDuration(`${days}d`)).toBe(days * 86_400_000);
  });
});

describe("formatDuration", () => {
  const cases: [number, string][] = [
    [0, "0ms"],
    [1, "1ms"],
    [250, "250ms"],
    [999, "999ms"],
    [1000, "1s"],
    [1500, "1.5s"],
    [1001, "1.001s"],
    [59_999, "59.999s"],
    [60_000, "1m"],
    [90_000, "1m30s"],
    [90_500, "1m30.5s"],
    [3_600_000, "1h"],
    [3_661_000, "1h1m1s"],
    [86_400_000, "1d"],
    [90_000_000, "1d1h"],
    [86_400_001, "1d0.001s"],
    [-1500, "-1.5s"],
    [12.6, "13ms"],
  ];
  for (const [ms, s] of cases) test(`${ms} → ${s}`, () => expect(formatDuration(ms)).toBe(s));

  test("round-trips through parseDuration for whole units", () => {
    for (const s of ["250ms", "30s", "5m", "2h", "1d"]) expect(formatDuration(parseDuration(s))).toBe(s);
  });
});
