/**
 * A CronRule keeps the instants it last computed (next()'s run, nextAfter's last answer) and
 * answers later questions from them. A rule's instants never change, so every answer must be
 * what a fresh rule, which remembers nothing, computes: checked here for rules with and
 * without seconds, sparse and dense, in zones with DST transitions both ways, with questions
 * asked in order (a creation, then the next a little later), out of order, on instants, and
 * past the end of what is kept.
 */
import { describe, expect, test } from "bun:test";
import { CronRule, type CronRuleSpec } from "../../src/time/cron-rule.ts";

const SPECS: CronRuleSpec[] = [
  { cron: "*/10 * * * * *", timezone: "UTC" },
  { cron: "0 9 * * 1-5", timezone: "America/New_York" },
  { cron: "30 2 * * *", timezone: "Europe/Berlin" }, // in the spring gap once a year
  { cron: "30 1 * * *", timezone: "America/New_York", dst: { fold: "both" } }, // twice in the fold
  { cron: "*/15 * * * *", timezone: "Australia/Lord_Howe" }, // a half-hour transition
  { cron: "0 0 29 2 *", timezone: "UTC" }, // every four years
  { cron: "0 12 * * 0", timezone: "Asia/Kolkata" },
];

/** A seeded PRNG (mulberry32): the same questions every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const START = Date.UTC(2026, 0, 1);
const YEAR = 365 * 86_400_000;

describe("a CronRule's kept instants answer as a fresh rule does", () => {
  for (const spec of SPECS) {
    test(`${spec.cron} ${spec.timezone}${spec.dst ? ` ${JSON.stringify(spec.dst)}` : ""}`, () => {
      const kept = new CronRule(spec);
      const fresh = () => new CronRule(spec);
      const rnd = prng(spec.cron.length * 7919 + spec.timezone.length);
      // Creations a little apart (what the API asks), then jumps back and forth.
      let t = START;
      for (let i = 0; i < 60; i++) {
        t += Math.floor(rnd() * (i < 40 ? 3_600_000 : 2 * YEAR)) * (i % 7 === 6 ? -1 : 1);
        expect(kept.next(32, t)).toEqual(fresh().next(32, t));
        expect(kept.nextAfter(t)).toBe(fresh().nextAfter(t));
        // On an instant itself: strictly after it.
        const at = fresh().nextAfter(t);
        if (at !== null) {
          expect(kept.nextAfter(at)).toBe(fresh().nextAfter(at));
          expect(kept.next(5, at)).toEqual(fresh().next(5, at));
        }
        // A bounded question.
        expect(kept.next(10, t, t + 86_400_000)).toEqual(fresh().next(10, t, t + 86_400_000));
      }
    });
  }

  test("the same question again (a herd of schedules on one rule) is answered without a search", () => {
    const rule = new CronRule({ cron: "0 9 * * 1-5", timezone: "America/New_York" });
    const at = Date.UTC(2026, 11, 7, 14);
    const first = rule.nextAfter(at);
    const t0 = performance.now();
    for (let i = 0; i < 10_000; i++) expect(rule.nextAfter(at)).toBe(first);
    // A search is tens of µs; 10,000 of them would be hundreds of ms.
    expect(performance.now() - t0).toBeLessThan(100);
  });
});
