/** Hostile and edge values for the API fuzz suite (fast-check arbitraries). */
import fc from "fast-check";

/** A secret every fuzzed job carries in its target's Authorization header and body: no log line may show it. */
export const FUZZ_SECRET = "sk_fuzz_7f3a9c0e1b2d4f6a8c0e2b4d6f8a0c1e";

const DEEP = (n: number, leaf: unknown = 1): unknown => {
  let v: unknown = leaf;
  for (let i = 0; i < n; i++) v = i % 2 === 0 ? [v] : { a: v };
  return v;
};

export const EDGE_STRINGS = [
  "",
  " ",
  "\t",
  "\r\n",
  "\u0000",
  "a\u0000b",
  "\uD800",
  "x\uDC00",
  "\uDBFF\uDFFF",
  "💥",
  "Zoë",
  "ǅ",
  "\u202E",
  "\uFEFF",
  "null",
  "true",
  "0",
  "-1",
  "1e309",
  "NaN",
  "Infinity",
  "0x10",
  "%00",
  "%ZZ",
  "../../etc/passwd",
  "<script>",
  "'; DROP TABLE jobs; --",
  // durations
  "0ms",
  "1ms",
  "-1s",
  "1.5s",
  "30s",
  "1e3s",
  "999999999999d",
  "366d",
  "7d",
  "1h30m",
  "PT5M",
  "s",
  "10 s",
  // instants
  "0001-01-01T00:00:00Z",
  "1969-12-31T23:59:59Z",
  "1970-01-01T00:00:00Z",
  "9999-12-31T23:59:59Z",
  "+275760-09-13T00:00:00Z",
  "2026-02-30T00:00:00Z",
  "2026-12-01T24:00:00Z",
  "2026-12-01T09:00:00+25:00",
  "2026-12-01T09:00:00.1234567891Z",
  "2026-12-01",
  // cron
  "* * * * *",
  "* * * * * *",
  "*/0 * * * *",
  "0 0 31 2 *",
  "0 0 30 2 *",
  "@yearly",
  "@reboot",
  "L * * * *",
  "0 0 L * *",
  "60 * * * *",
  "0 24 * * *",
  "* * * * * * *",
  "0 9 * * MON-FRI",
  "0 9 ? * *",
  "0 0 1 1 * 2099",
  // zones
  "UTC",
  "Etc/GMT+14",
  "Etc/GMT-14",
  "America/New_York",
  "Mars/Olympus",
  "utc",
  "Europe/Kyiv",
  "+05:30",
  "Asia/Kolkata\u0000",
  // URLs
  "http://127.0.0.1/",
  "http://[::1]/",
  "http://169.254.169.254/latest",
  "https://user:pass@example.com/",
  "ftp://example.com/",
  "https://example.com:99999/",
  "https://exa mple.com/",
  `https://example.com/${"a".repeat(3000)}`,
  "javascript:alert(1)",
  // cursors and ids
  "MTIz",
  "OTk5OTk5OTk5OTk5OTk5OTk5OQ",
  "W10",
  "WyJ4IiwieSJd",
  "0190a5f4-3b1c-7d2e-8f00-000000000000",
  "00000000-0000-0000-0000-000000000000",
];

export const EDGE_NUMBERS = [0, -0, 1, -1, 0.5, 1.5, 999, 1000, 1001, 10_000, 2 ** 31, 2 ** 53, 2 ** 63, -(2 ** 63), 1e21, 1e308, -1e308, 5e-324];

export const nastyString = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...EDGE_STRINGS) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom(20_000, 70_000, 300_000).map((n) => "x".repeat(n)) },
);

export const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: nastyString },
  { weight: 2, arbitrary: fc.constantFrom(...EDGE_NUMBERS) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constantFrom([], {}, [null], { "": 1 }, { __proto__: 1 }, { constructor: { prototype: 1 } }) },
  { weight: 1, arbitrary: fc.constantFrom(10, 63, 64, 65, 500, 5000).map((n) => DEEP(n)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(nastyString, fc.constantFrom("x", 1, null), { maxKeys: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom(2_000, 20_000).map((n) => Array.from({ length: n }, (_, i) => i)) },
);

/** Header values: every value fetch might refuse, and unicode names. */
export const nastyHeaders = fc.oneof(
  fc.dictionary(
    fc.constantFrom("x-a", "X-Ünï", "x a", "", "proxy-authorization", "expect", "host", "content-length", `x-${"n".repeat(300)}`, "webhook-id"),
    nastyString,
    { maxKeys: 3 },
  ),
  fc.dictionary(fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 10 }), fc.string({ unit: "binary", maxLength: 20 }), { maxKeys: 3 }),
);
