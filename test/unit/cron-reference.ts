// A brute-force reference for CronRule, written independently of src/time/cron-rule.ts and of
// croner: a tiny matcher for the cron subset the tests use, a walk over every wall-clock
// minute (or second, for 6-field rules) of a calendar range, and Temporal to resolve each
// matching wall-clock time to instants under the DST policy of README "Recurring schedules".
import { Temporal } from "../../src/time/temporal.ts";

export type Gap = "shift" | "skip";
export type Fold = "first" | "last" | "both";
export interface Dst {
  gap?: Gap;
  fold?: Fold;
}

type Pred = (v: number) => boolean;

function num(s: string, min: number, max: number, src: string): number {
  if (!/^\d+$/.test(s)) throw new Error(`reference matcher: unsupported part ${JSON.stringify(src)}`);
  const v = Number(s);
  if (v < min || v > max) throw new Error(`reference matcher: ${v} out of ${min}-${max} in ${JSON.stringify(src)}`);
  return v;
}

/** numbers, lists, ranges, steps and `*` — nothing else (throws, so a test cannot silently use more). */
function fieldPred(src: string, min: number, max: number): Pred {
  const parts = src.split(",").map((part): Pred => {
    const [range, stepSrc] = part.split("/") as [string, string | undefined];
    const step = stepSrc === undefined ? 1 : num(stepSrc, 1, max, part);
    let lo: number;
    let hi: number;
    if (range === "*") [lo, hi] = [min, max];
    else if (range.includes("-")) {
      const [a, b] = range.split("-") as [string, string];
      [lo, hi] = [num(a, min, max, part), num(b, min, max, part)];
    } else {
      lo = num(range, min, max, part);
      hi = stepSrc === undefined ? lo : max; // "a/s" runs from a to the top, every s
    }
    return (v) => v >= lo && v <= hi && (v - lo) % step === 0;
  });
  return (v) => parts.some((p) => p(v));
}

interface Matcher {
  sec: Pred;
  min: Pred;
  hour: Pred;
  day: (d: Temporal.PlainDate) => boolean;
  sixFields: boolean;
}

export function matcher(cron: string): Matcher {
  const f = cron.trim().split(/\s+/);
  if (f.length !== 5 && f.length !== 6) throw new Error(`reference matcher: ${f.length} fields`);
  const [sec, min, hour, dom, mon, dow] = (f.length === 6 ? f : ["0", ...f]) as [string, string, string, string, string, string];
  const domL = dom === "L";
  const domP = domL ? () => false : fieldPred(dom, 1, 31);
  const monP = fieldPred(mon, 1, 12);
  const dowP = fieldPred(dow, 0, 7);
  const domRestricted = dom !== "*";
  const dowRestricted = dow !== "*";
  return {
    sixFields: f.length === 6,
    sec: fieldPred(sec, 0, 59),
    min: fieldPred(min, 0, 59),
    hour: fieldPred(hour, 0, 23),
    day: (d) => {
      if (!monP(d.month)) return false;
      const domOk = domL ? d.day === d.daysInMonth : domP(d.day);
      const wd = d.dayOfWeek % 7; // Temporal: 1 = Monday … 7 = Sunday; cron: 0 or 7 = Sunday
      const dowOk = dowP(wd) || (wd === 0 && dowP(7));
      // Vixie cron: when both day fields are restricted, either may match.
      return domRestricted && dowRestricted ? domOk || dowOk : domOk && dowOk;
    },
  };
}

/** Every wall-clock time in [from, to] the rule names, in order. */
export function matchingWalls(cron: string, from: Temporal.PlainDateTime, to: Temporal.PlainDateTime): Temporal.PlainDateTime[] {
  const m = matcher(cron);
  const out: Temporal.PlainDateTime[] = [];
  const lastSecond = m.sixFields ? 59 : 0;
  const last = to.toPlainDate();
  // Wall-clock times compared as plain numbers (fields read as if UTC; no zone is involved).
  const key = (y: number, mo: number, d: number, h: number, mi: number, s: number) => Date.UTC(y, mo - 1, d, h, mi, s);
  const lo = key(from.year, from.month, from.day, from.hour, from.minute, from.second);
  const hi = key(to.year, to.month, to.day, to.hour, to.minute, to.second);
  for (let d = from.toPlainDate(); Temporal.PlainDate.compare(d, last) <= 0; d = d.add({ days: 1 })) {
    const dayOk = m.day(d);
    // Step over every minute (and second) of the day; the day test is hoisted only for speed.
    for (let h = 0; h < 24; h++) {
      for (let mi = 0; mi < 60; mi++) {
        for (let s = 0; s <= lastSecond; s++) {
          if (dayOk && m.hour(h) && m.min(mi) && m.sec(s)) {
            const k = key(d.year, d.month, d.day, h, mi, s);
            if (k >= lo && k <= hi) out.push(new Temporal.PlainDateTime(d.year, d.month, d.day, h, mi, s));
          }
        }
      }
    }
  }
  return out;
}

export type Resolved =
  | { wall: string; kind: "normal"; at: number }
  | { wall: string; kind: "gap"; shifted: number }
  | { wall: string; kind: "fold"; first: number; last: number };

/** How a wall-clock time exists in a zone, found by round-tripping through Temporal. */
export function resolveWall(wall: Temporal.PlainDateTime, tz: string): Resolved {
  const early = wall.toZonedDateTime(tz, { disambiguation: "earlier" });
  const late = wall.toZonedDateTime(tz, { disambiguation: "later" });
  const s = wall.toString();
  if (!early.toPlainDateTime().equals(wall)) {
    // In a gap, "earlier" and "later" lie the gap's length apart; the shifted instant is the
    // wall-clock time moved forward by that length, which must exist (02:30 → 03:30).
    const gapMs = late.epochMilliseconds - early.epochMilliseconds;
    if (gapMs <= 0) throw new Error(`reference: odd gap at ${s} ${tz}`);
    const shifted = wall.add({ milliseconds: gapMs }).toZonedDateTime(tz, { disambiguation: "reject" }).epochMilliseconds;
    return { wall: s, kind: "gap", shifted };
  }
  if (!late.toPlainDateTime().equals(wall)) throw new Error(`reference: ${s} ${tz} does not round-trip`);
  if (early.epochMilliseconds === late.epochMilliseconds) return { wall: s, kind: "normal", at: early.epochMilliseconds };
  return { wall: s, kind: "fold", first: early.epochMilliseconds, last: late.epochMilliseconds };
}

/** Fixed hour: a number or a list of numbers (README "Recurring schedules"). Anything else is an interval rule. */
export function referenceFixed(cron: string): boolean {
  const f = cron.trim().split(/\s+/);
  const hour = f.length === 6 ? f[2]! : f[1]!;
  return /^\d+(,\d+)*$/.test(hour);
}

export function policyOf(cron: string, dst?: Dst): { gap: Gap; fold: Fold } {
  const fixed = referenceFixed(cron);
  return { gap: dst?.gap ?? (fixed ? "shift" : "skip"), fold: dst?.fold ?? (fixed ? "first" : "both") };
}

/** The fire instants in (afterMs, untilMs], sorted, without duplicates. */
export function applyPolicy(resolved: Resolved[], policy: { gap: Gap; fold: Fold }, afterMs: number, untilMs: number): number[] {
  const all: number[] = [];
  for (const r of resolved) {
    if (r.kind === "normal") all.push(r.at);
    else if (r.kind === "gap") {
      if (policy.gap === "shift") all.push(r.shifted);
    } else {
      if (policy.fold !== "last") all.push(r.first);
      if (policy.fold !== "first") all.push(r.last);
    }
  }
  const inWindow = all.filter((x) => x > afterMs && x <= untilMs).sort((a, b) => a - b);
  return inWindow.filter((x, i) => i === 0 || x !== inWindow[i - 1]);
}

/**
 * Wall-clock matches, resolved, for every wall-clock time that can name an instant in the
 * window: the window's wall-clock span widened by 2 hours each way (more than any gap or fold
 * of the zones tested: 1 hour at most), so a shifted gap time or a second fold reading is not lost.
 */
export function referenceResolved(cron: string, tz: string, afterMs: number, untilMs: number): Resolved[] {
  const wall = (ms: number) => Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(tz).toPlainDateTime();
  return matchingWalls(cron, wall(afterMs).subtract({ hours: 2 }), wall(untilMs).add({ hours: 2 })).map((w) => resolveWall(w, tz));
}

export function referenceRuns(cron: string, tz: string, afterMs: number, untilMs: number, dst?: Dst): number[] {
  return applyPolicy(referenceResolved(cron, tz, afterMs, untilMs), policyOf(cron, dst), afterMs, untilMs);
}
