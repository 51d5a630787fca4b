import { describe, expect, test } from "bun:test";
import { parseRetryAfter } from "../../src/worker/retry-after.ts";

const NOW = Date.parse("2015-10-21T07:00:00Z");
const DAY = 24 * 60 * 60 * 1000;

describe("parseRetryAfter", () => {
  test("absent", () => {
    expect(parseRetryAfter(null, NOW)).toBeNull();
    expect(parseRetryAfter(undefined, NOW)).toBeNull();
    expect(parseRetryAfter("", NOW)).toBeNull();
    expect(parseRetryAfter("   ", NOW)).toBeNull();
  });

  test("delta-seconds", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120_000);
    expect(parseRetryAfter("0", NOW)).toBe(0);
    expect(parseRetryAfter(" 5 ", NOW)).toBe(5_000);
    expect(parseRetryAfter("007", NOW)).toBe(7_000);
  });

  test("invalid numbers and garbage", () => {
    for (const bad of ["-1", "1.5", "+5", "1e3", "0x10", "5s", "soon", "12 34", "Infinity", "NaN", "2015-10-21T07:28:00Z"]) {
      expect(parseRetryAfter(bad, NOW)).toBeNull();
    }
  });

  test("absurd values are capped at 30 days", () => {
    expect(parseRetryAfter("99999999", NOW)).toBe(30 * DAY);
    expect(parseRetryAfter("9".repeat(400), NOW)).toBe(30 * DAY);
    expect(parseRetryAfter("Fri, 01 Jan 2100 00:00:00 GMT", NOW)).toBe(30 * DAY);
  });

  test("IMF-fixdate", () => {
    expect(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", NOW)).toBe(28 * 60_000);
  });

  test("RFC 850 date", () => {
    expect(parseRetryAfter("Wednesday, 21-Oct-15 07:28:00 GMT", NOW)).toBe(28 * 60_000);
  });

  test("asctime date is UTC whatever the local zone", () => {
    expect(parseRetryAfter("Wed Oct 21 07:28:00 2015", NOW)).toBe(28 * 60_000);
    expect(parseRetryAfter("Wed Oct  1 07:28:00 2015", Date.parse("2015-10-01T07:00:00Z"))).toBe(28 * 60_000);
  });

  test("a date in the past is 0", () => {
    expect(parseRetryAfter("Wed, 21 Oct 2015 06:00:00 GMT", NOW)).toBe(0);
    expect(parseRetryAfter("Thu, 01 Jan 1970 00:00:00 GMT", NOW)).toBe(0);
  });

  test("malformed dates are null", () => {
    expect(parseRetryAfter("Wed, 21 Foo 2015 07:28:00 GMT", NOW)).toBeNull();
    expect(parseRetryAfter("Wed, 21 Oct 2015 07:28:00", NOW)).toBeNull();
    expect(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 PST", NOW)).toBeNull();
  });
});
