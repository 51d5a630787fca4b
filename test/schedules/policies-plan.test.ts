// The pure occurrence planner (src/dispatcher/occurrence-plan.ts) under each misfire policy,
// with a real CronRule: which nominal instants are created, which are flagged late, how many
// are dropped, what fire_once coalesces, and where next_fire_at lands.
import { describe, expect, test } from "bun:test";
import { planOccurrences, type PlanInput } from "../../src/dispatcher/occurrence-plan.ts";
import { CronRule } from "../../src/time/cron-rule.ts";

const SEC = 1000;
const MIN = 60 * SEC;
const T0 = Date.parse("2030-01-07T12:00:00Z");
const everyMinute = new CronRule({ cron: "* * * * *", timezone: "UTC" });
const at = (ms: number) => new Date(ms).toISOString();
const minutes = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => T0 + (from + i) * MIN);

function plan(over: Partial<PlanInput> = {}) {
  return planOccurrences({
    rule: everyMinute,
    nextFireAt: T0,
    nowMs: T0 + 10 * MIN + 10 * SEC,
    misfire: "fire_once",
    misfireGraceMs: null,
    catchupWindowMs: 86_400_000,
    endAt: null,
    maxScan: 20_000,
    ...over,
  });
}
const created = (p: ReturnType<typeof plan>) => p.create.map((o) => at(o.nominal));
const late = (p: ReturnType<typeof plan>) => p.create.filter((o) => o.late).map((o) => at(o.nominal));

describe('planOccurrences: ten minutes behind on "* * * * *" (grace 30 s: half the gap)', () => {
  // nextFireAt = 12:00, now = 12:10:10. 12:00 … 12:09 are missed (later than 30 s), 12:10 is
  // only 10 s late (on time); the next occurrence is 12:11.
  test("skip: only the on-time occurrence; the ten missed ones are counted, not created", () => {
    const p = plan({ misfire: "skip" });
    expect(created(p)).toEqual([at(T0 + 10 * MIN)]);
    expect(late(p)).toEqual([]);
    expect(p.misfired).toBe(10);
    expect(p.coalesceBefore).toBeNull();
    expect(p.nextFireAt).toBe(T0 + 11 * MIN);
    expect(p.lastNominal).toBe(T0 + 10 * MIN);
  });

  test("fire_once: the most recent missed one (late) plus the on-time one; nine coalesce", () => {
    const p = plan({ misfire: "fire_once" });
    expect(created(p)).toEqual([at(T0 + 9 * MIN), at(T0 + 10 * MIN)]);
    expect(late(p)).toEqual([at(T0 + 9 * MIN)]);
    expect(p.misfired).toBe(9);
    expect(p.coalesceBefore).toBe(T0 + 9 * MIN);
    expect(p.nextFireAt).toBe(T0 + 11 * MIN);
    // The on-time one must start within its grace: starting late it would be a second
    // catch-up run after one outage (found by the failover drill).
    expect(p.create.map((o) => o.strictStart ?? false)).toEqual([false, true]);
  });

  test("fire_once with nothing missed: on-time occurrences may still start late (they are then the one catch-up)", () => {
    const p = plan({ misfire: "fire_once", nextFireAt: T0 + 10 * MIN });
    expect(created(p)).toEqual([at(T0 + 10 * MIN)]);
    expect(p.create[0]!.strictStart).toBeUndefined();
  });

  test("fire_all: every one of the eleven, the ten missed ones flagged late, none dropped", () => {
    const p = plan({ misfire: "fire_all" });
    expect(created(p)).toEqual(minutes(0, 10).map(at));
    expect(late(p)).toEqual(minutes(0, 9).map(at));
    expect(p.misfired).toBe(0);
    expect(p.coalesceBefore).toBeNull();
    expect(p.nextFireAt).toBe(T0 + 11 * MIN);
    for (const o of p.create) expect(o.graceMs).toBe(30 * SEC);
  });

  test("catchup_window 3m30s: occurrences older than the window never run, under every policy", () => {
    // now − 12:07 = 3m10s (inside), now − 12:06 = 4m10s (outside): 12:00 … 12:06 are too old.
    const w = 3 * MIN + 30 * SEC;
    const all = plan({ misfire: "fire_all", catchupWindowMs: w });
    expect(created(all)).toEqual(minutes(7, 10).map(at));
    expect(late(all)).toEqual(minutes(7, 9).map(at));
    expect(all.misfired).toBe(7);
    expect(all.nextFireAt).toBe(T0 + 11 * MIN);

    const once = plan({ misfire: "fire_once", catchupWindowMs: w });
    expect(created(once)).toEqual([at(T0 + 9 * MIN), at(T0 + 10 * MIN)]);
    expect(once.misfired).toBe(7 + 2);
    expect(once.coalesceBefore).toBe(T0 + 9 * MIN);

    const skip = plan({ misfire: "skip", catchupWindowMs: w });
    expect(created(skip)).toEqual([at(T0 + 10 * MIN)]);
    expect(skip.misfired).toBe(10);
  });

  test("fire_once with every missed occurrence outside the catch-up window runs nothing late", () => {
    const p = plan({ misfire: "fire_once", nowMs: T0 + 10 * MIN + 50 * SEC, catchupWindowMs: 40 * SEC });
    // 12:10 is 50 s late: missed and too old; nothing within the window.
    expect(created(p)).toEqual([]);
    expect(p.misfired).toBe(11);
    expect(p.coalesceBefore).toBeNull();
    expect(p.nextFireAt).toBe(T0 + 11 * MIN);
  });

  test("end_at stops the rule: nothing after it, next_fire_at null", () => {
    const endAt = T0 + 5 * MIN; // an occurrence itself: it still counts
    const all = plan({ misfire: "fire_all", endAt });
    expect(created(all)).toEqual(minutes(0, 5).map(at));
    expect(all.nextFireAt).toBeNull();
    expect(all.lastNominal).toBe(endAt);

    const once = plan({ misfire: "fire_once", endAt: endAt + 30 * SEC });
    expect(created(once)).toEqual([at(endAt)]);
    expect(late(once)).toEqual([at(endAt)]);
    expect(once.misfired).toBe(5);
    expect(once.nextFireAt).toBeNull();

    // end_at in the future: the rule goes on.
    expect(plan({ misfire: "skip", endAt: T0 + 60 * MIN }).nextFireAt).toBe(T0 + 11 * MIN);
    // end_at before the next occurrence, which is still in the future: ended too.
    const future = plan({ misfire: "skip", nowMs: T0 + 10 * MIN + 10 * SEC, endAt: T0 + 10 * MIN + 30 * SEC });
    expect(created(future)).toEqual([at(T0 + 10 * MIN)]);
    expect(future.nextFireAt).toBeNull();
  });

  test("nothing due yet: nothing created, next_fire_at unchanged", () => {
    const p = plan({ nowMs: T0 - 1 });
    expect(p.create).toEqual([]);
    expect(p.misfired).toBe(0);
    expect(p.nextFireAt).toBe(T0);
    expect(p.lastNominal).toBeNull();
  });

  test("a long backlog worked through in bounded passes ends where a single pass would (fire_once)", () => {
    const one = plan({ misfire: "fire_once" });
    let next: number | null = T0;
    let misfired = 0;
    const made: number[] = [];
    let coalesce: number | null = null;
    for (let pass = 0; pass < 20 && next !== null && next <= T0 + 10 * MIN + 10 * SEC; pass++) {
      const p = plan({ misfire: "fire_once", nextFireAt: next, maxScan: 3 });
      misfired += p.misfired;
      made.push(...p.create.map((o) => o.nominal));
      coalesce = p.coalesceBefore ?? coalesce;
      next = p.nextFireAt;
    }
    expect(made.map(at)).toEqual(created(one));
    expect(misfired).toBe(one.misfired);
    expect(coalesce).toBe(one.coalesceBefore);
    expect(next).toBe(one.nextFireAt);
  });
});

describe("planOccurrences: misfire grace", () => {
  const tenSeconds = new CronRule({ cron: "*/10 * * * * *", timezone: "UTC" });
  const hourly = new CronRule({ cron: "0 * * * *", timezone: "UTC" });

  test('default grace for "*/10 * * * * *" is 5 s (half the gap)', () => {
    const onTime = planOccurrences({
      rule: tenSeconds,
      nextFireAt: T0,
      nowMs: T0 + 5 * SEC,
      misfire: "skip",
      misfireGraceMs: null,
      catchupWindowMs: 86_400_000,
      endAt: null,
      maxScan: 100,
    });
    expect(onTime.create.map((o) => [at(o.nominal), o.late, o.graceMs])).toEqual([[at(T0), false, 5 * SEC]]);
    expect(onTime.nextFireAt).toBe(T0 + 10 * SEC);
    const missed = planOccurrences({
      rule: tenSeconds,
      nextFireAt: T0,
      nowMs: T0 + 5 * SEC + 1,
      misfire: "skip",
      misfireGraceMs: null,
      catchupWindowMs: 86_400_000,
      endAt: null,
      maxScan: 100,
    });
    expect(missed.create).toEqual([]);
    expect(missed.misfired).toBe(1);
  });

  test('default grace for "0 * * * *" is 60 s (half the gap, capped at 60 s)', () => {
    const base = { rule: hourly, nextFireAt: T0, misfireGraceMs: null, catchupWindowMs: 86_400_000, endAt: null, maxScan: 100 } as const;
    const onTime = planOccurrences({ ...base, nowMs: T0 + 60 * SEC, misfire: "fire_all" });
    expect(onTime.create.map((o) => [at(o.nominal), o.late, o.graceMs])).toEqual([[at(T0), false, 60 * SEC]]);
    expect(onTime.nextFireAt).toBe(T0 + 60 * MIN);
    const late1 = planOccurrences({ ...base, nowMs: T0 + 61 * SEC, misfire: "fire_all" });
    expect(late1.create.map((o) => [at(o.nominal), o.late])).toEqual([[at(T0), true]]);
  });

  test("an explicit misfire_grace is honoured (shorter and longer than the default)", () => {
    const base = { rule: hourly, nextFireAt: T0, catchupWindowMs: 86_400_000, endAt: null, maxScan: 100 } as const;
    const short = planOccurrences({ ...base, nowMs: T0 + 3 * SEC, misfire: "skip", misfireGraceMs: 2 * SEC });
    expect(short.create).toEqual([]);
    expect(short.misfired).toBe(1);
    const shortOnce = planOccurrences({ ...base, nowMs: T0 + 3 * SEC, misfire: "fire_once", misfireGraceMs: 2 * SEC });
    expect(shortOnce.create.map((o) => [o.late, o.graceMs])).toEqual([[true, 2 * SEC]]);
    const long = planOccurrences({ ...base, nowMs: T0 + 10 * MIN, misfire: "skip", misfireGraceMs: 15 * MIN });
    expect(long.create.map((o) => [at(o.nominal), o.late, o.graceMs])).toEqual([[at(T0), false, 15 * MIN]]);
    expect(long.misfired).toBe(0);
    // misfire_grace 0: even 1 ms late is missed.
    const zero = planOccurrences({ ...base, nowMs: T0 + 1, misfire: "skip", misfireGraceMs: 0 });
    expect(zero.misfired).toBe(1);
  });

  test("an occurrence only slightly late (within grace) is on time under every policy", () => {
    for (const misfire of ["skip", "fire_once", "fire_all"] as const) {
      const p = plan({ misfire, nextFireAt: T0 + 10 * MIN, nowMs: T0 + 10 * MIN + 29 * SEC });
      expect(p.create.map((o) => [at(o.nominal), o.late])).toEqual([[at(T0 + 10 * MIN), false]]);
      expect(p.misfired).toBe(0);
      expect(p.coalesceBefore).toBeNull();
    }
  });

  test("per-second rule: grace is 500 ms", () => {
    const perSecond = new CronRule({ cron: "* * * * * *", timezone: "UTC" });
    const p = planOccurrences({
      rule: perSecond,
      nextFireAt: T0,
      nowMs: T0 + 2 * SEC + 400,
      misfire: "fire_all",
      misfireGraceMs: null,
      catchupWindowMs: 86_400_000,
      endAt: null,
      maxScan: 100,
    });
    expect(p.create.map((o) => [at(o.nominal), o.late, o.graceMs])).toEqual([
      [at(T0), true, 500],
      [at(T0 + SEC), true, 500],
      [at(T0 + 2 * SEC), false, 500],
    ]);
    expect(p.nextFireAt).toBe(T0 + 3 * SEC);
  });

  test("in a real zone across a DST change the grace uses the real gap (America/New_York, hourly)", () => {
    // 2030-03-10: 02:30 does not exist; "30 * * * *" (hour wildcard) skips it, so after
    // 01:30 EST (06:30Z) the next is 03:30 EDT (07:30Z): one real hour apart, grace 60 s.
    const ny = new CronRule({ cron: "30 * * * *", timezone: "America/New_York" });
    const start = Date.parse("2030-03-10T06:30:00Z"); // 01:30 EST
    const p = planOccurrences({
      rule: ny,
      nextFireAt: start,
      nowMs: start + 2 * 60 * MIN,
      misfire: "fire_all",
      misfireGraceMs: null,
      catchupWindowMs: 86_400_000,
      endAt: null,
      maxScan: 100,
    });
    expect(created(p as ReturnType<typeof plan>)).toEqual(["2030-03-10T06:30:00.000Z", "2030-03-10T07:30:00.000Z", "2030-03-10T08:30:00.000Z"]);
    expect(p.create.map((o) => o.graceMs)).toEqual([60 * SEC, 60 * SEC, 60 * SEC]);
  });
});
