// The request body's text decides whether its parse must be walked for strings the database
// cannot store (NUL, lone surrogates): the walk cost ~4 µs a job of a batch, and a body with
// no `\u` escape, no NUL and no lone surrogate cannot hold one. This checks the shortcut
// against the walk itself over random values, so a case it missed would fail here; the API
// refusals themselves are in test/api/hostile-input.test.ts.
import { describe, expect, test } from "bun:test";
import { findBadString, mayHoldBadText } from "../../src/api/input-guard.ts";

const job = (i: number) => ({
  target: { url: `https://example.com/h/${i}`, body: { k: `key-${i}`, note: "ok 😀 ünïcödé" }, headers: { "x-a": "b" } },
  delay: "5m",
});

describe("mayHoldBadText: when the parsed body must be walked", () => {
  test("an ordinary batch (emoji and accents included) is not walked", () => {
    expect(mayHoldBadText(JSON.stringify({ jobs: Array.from({ length: 1000 }, (_, i) => job(i)) }))).toBe(false);
  });

  test("a \\u escape, a raw NUL or a lone surrogate makes it walk", () => {
    expect(mayHoldBadText(JSON.stringify({ a: "x\u0000y" }))).toBe(true); // written as \u0000
    expect(mayHoldBadText(JSON.stringify({ a: "\uD800" }))).toBe(true); // written as \ud800
    expect(mayHoldBadText('{"a":"\\u00e9"}')).toBe(true); // harmless, walked all the same
    expect(mayHoldBadText('{"a":"x\u0000"}')).toBe(true);
    expect(mayHoldBadText('{"a":"x\uDC00"}')).toBe(true);
  });

  test("never says no where the walk finds a bad string (2,000 random values)", () => {
    const pieces = ["a", "é", "😀", "\u0000", "\uD800", "\uDFFF", "\uD83D", "\uDE00", "\\", '"', "\u0001", "\n", "k"];
    let bad = 0;
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const str = () => Array.from({ length: rnd(6) }, () => pieces[rnd(pieces.length)]).join("");
    for (let i = 0; i < 2000; i++) {
      const value = { [str()]: str(), list: [str(), { [str()]: str() }], n: i };
      const text = JSON.stringify(value);
      if (findBadString(JSON.parse(text))) {
        bad++;
        expect({ text, walk: mayHoldBadText(text) }).toEqual({ text, walk: true });
      }
    }
    expect(bad).toBeGreaterThan(100);
  });
});
