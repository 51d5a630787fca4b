import { Cron } from "croner";
import { BoundedMap } from "../bounded-map.ts";
import { Temporal } from "./temporal.ts";

export type GapPolicy = "shift" | "skip";
export type FoldPolicy = "first" | "last" | "both";

export interface CronRuleSpec {
  cron: string;
  timezone: string;
  dst?: { gap?: GapPolicy; fold?: FoldPolicy };
}

export class CronRuleError extends Error {
  constructor(
    readonly field: "cron" | "timezone",
    message: string,
  ) {
    super(message);
    this.name = "CronRuleError";
  }
}

const FIXED_NICKNAMES = new Set(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight"]);
const MAX_SCAN = 100_000;
/** Spans of two days to hop through before giving up (a rule that names a day once in years). */
const MAX_HOPS = 4000;
const DAY = 86_400_000;
const HALF_DAY = DAY / 2;
/** More than any UTC-offset change (zones shift by at most a few hours at once). */
const EDGE_MS = 4 * 3600 * 1000;
/** Instants next() computes and keeps at least (see CronRule.run). */
const RUN_MIN = 64;

interface Offsets {
  /** Span of instants these offsets describe. */
  lo: number;
  hi: number;
  /** The transition instant inside the span, if any. */
  tt: number | null;
  /** Offsets in ms (wall = instant + offset) before and after tt. */
  offBefore: number;
  offAfter: number;
}

/**
 * A cron rule in a real time zone. croner enumerates the wall-clock times the rule names in
 * a zone-free calendar (UTC stands in for "local"); each is resolved to instants with the
 * zone's UTC offsets around it, which Temporal supplies (its transitions, asked afresh for
 * every span of two days), under the DST policy:
 * - classic cron by default: a rule with a fixed hour (a number or a list of numbers) runs
 *   once in a spring-forward gap, at the shifted instant (02:30 that does not exist → 03:30),
 *   and once in a fall-back fold (the first 01:30); a rule whose hour is `*`, a step or a
 *   range runs on every real instant it names (nothing in a gap, both 01:30s in a fold);
 * - `dst.gap` (shift | skip) and `dst.fold` (first | last | both) override that.
 * croner's own zone handling differs (a gap time runs at 03:00), which is why it is only
 * asked for wall-clock matches.
 */
export class CronRule {
  readonly gap: GapPolicy;
  readonly fold: FoldPolicy;
  private readonly wall: Cron;

  constructor(readonly spec: CronRuleSpec) {
    const fields = spec.cron.trim().split(/\s+/);
    if (!spec.cron.trim().startsWith("@") && (fields.length < 5 || fields.length > 6)) {
      throw new CronRuleError("cron", `cron must have 5 fields (minute hour day month weekday) or 6 with leading seconds; got ${fields.length}`);
    }
    try {
      // utcOffset 0, not timezone "UTC": the same wall-clock matches, without croner asking
      // Intl.DateTimeFormat for every candidate (about 20x faster).
      this.wall = new Cron(spec.cron.trim(), { utcOffset: 0, mode: "5-or-6-parts", paused: true });
    } catch (err) {
      throw new CronRuleError("cron", `cron ${JSON.stringify(spec.cron)} is not valid: ${(err as Error).message.replace(/^CronPattern: /, "")}`);
    }
    assertTimeZone(spec.timezone);
    const fixed = isFixedHour(spec.cron);
    this.gap = spec.dst?.gap ?? (fixed ? "shift" : "skip");
    this.fold = spec.dst?.fold ?? (fixed ? "first" : "both");
  }

  /**
   * Instants strictly after `from`, in order, as next() last computed them (RUN_MIN of them,
   * or fewer where the search found no more). A rule's instants never change, so a question
   * from an instant at or after `from` whose answer lies within them is answered from them
   * (past their last one it is computed: a search that found none gave up at a horizon, and
   * one from later may find one beyond it). A schedule's creation asks its rule for the next
   * 32 instants (the minimum-interval check) and for its first: ~70 % of a creation's CPU,
   * every time (bench/README part 24).
   */
  private run: { from: number; at: number[] } | undefined;
  /** The last question nextAfter computed, and its answer: a herd of schedules on one rule asks the same one. */
  private last: { after: number; next: number | null } | undefined;

  /** The first fire instant strictly after `after` (epoch ms), or null if there is none. */
  nextAfter(afterMs: number): number | null {
    const known = this.known(afterMs, 1);
    if (known) return known[0] ?? null;
    if (this.last?.after === afterMs) return this.last.next;
    const next = this.compute(afterMs);
    this.last = { after: afterMs, next };
    return next;
  }

  /** The first `n` instants after afterMs from the run; undefined when the run cannot tell. */
  private known(afterMs: number, n: number): number[] | undefined {
    const r = this.run;
    if (!r || afterMs < r.from) return undefined;
    // The first instant of the run after afterMs (the run ascends).
    let lo = 0;
    let hi = r.at.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (r.at[mid]! <= afterMs) lo = mid + 1;
      else hi = mid;
    }
    return r.at.length - lo >= n ? r.at.slice(lo, lo + n) : undefined;
  }

  private compute(afterMs: number): number | null {
    // Two streams of wall-clock times, one per offset around a transition; in each, instants
    // rise with wall times, so each stream's first match is its best. After a fold, the
    // second stream starts over at the wall time of the transition. A stream that runs past
    // the span whose offsets are known hands over: the search goes on in the span around
    // that wall time (the next match may be days or a year away).
    let z = this.offsetsAround(afterMs);
    let from = -Infinity;
    let best: number | null = null;
    for (let hop = 0; hop < MAX_HOPS; hop++) {
      let beyond = Infinity;
      if (z.tt !== null && z.offAfter !== z.offBefore) {
        const r = this.firstInStream(afterMs, z, z.offAfter, Math.max(from, Math.max(afterMs, z.tt) + z.offAfter), best);
        best = r.best;
        beyond = Math.min(beyond, r.beyond);
      }
      const r = this.firstInStream(afterMs, z, z.offBefore, Math.max(from, afterMs + z.offBefore), best);
      best = r.best;
      beyond = Math.min(beyond, r.beyond);
      // Wall times from `beyond` on name instants no earlier than beyond - EDGE - offset.
      if (beyond === Infinity || (best !== null && best < beyond - Math.max(z.offBefore, z.offAfter) - EDGE_MS)) return best;
      z = this.offsetsAround(beyond - z.offAfter);
      from = beyond;
    }
    return best;
  }

  /** The stream's first instant after afterMs (or `best` if none beats it); `beyond` is the wall time where it left the span. */
  private firstInStream(afterMs: number, z: Offsets, off: number, startWall: number, best: number | null): { best: number | null; beyond: number } {
    const before = off === z.offBefore;
    const done = (b: number | null) => ({ best: b, beyond: Infinity });
    let cursor: Date | null = new Date(startWall - 1);
    for (let i = 0; i < MAX_SCAN; i++) {
      cursor = this.wall.nextRun(cursor);
      if (!cursor) return done(best);
      const w = cursor.getTime();
      const inst = w - off;
      if (best !== null && inst >= best) return done(best);
      // Past a transition (and its gap) the earlier offset names no more instants.
      if (before && z.tt !== null && z.offAfter !== z.offBefore && inst >= z.tt + Math.abs(z.offAfter - z.offBefore)) return done(best);
      // Near the span's ends a wall time's other reading (a fold's second instant) may lie
      // outside it, where the offsets are unknown: hand over to the span around it.
      if (inst < z.lo + EDGE_MS || inst > z.hi - EDGE_MS) return { best, beyond: w };
      if (inst <= afterMs) continue;
      const offAt = (x: number) => (z.tt === null || x < z.tt ? z.offBefore : z.offAfter);
      const validHere = offAt(inst) === off;
      const other = w - (before ? z.offAfter : z.offBefore);
      const validOther = z.tt !== null && offAt(other) !== off && offAt(other) === w - other;
      let take: boolean;
      if (validHere && validOther) take = this.fold === "both" || (this.fold === "first") === inst < other;
      else if (validHere) take = true;
      else take = !validOther && before && this.gap === "shift"; // a gap: moved forward by its length
      if (take) return done(inst);
    }
    return done(best);
  }

  private zoneCache: Offsets | undefined;

  /**
   * The UTC offsets within a day of an instant: one, or the two on either side of a
   * transition. Wall times in that span resolve by arithmetic; Temporal is asked only for
   * the transition, once per day of instants.
   */
  private offsetsAround(ms: number): Offsets {
    const c = this.zoneCache;
    if (c && ms >= c.lo + HALF_DAY && ms <= c.hi - HALF_DAY) return c;
    const tz = this.spec.timezone;
    const lo = ms - DAY;
    const hi = ms + DAY;
    const at = (x: number) => Temporal.Instant.fromEpochMilliseconds(x).toZonedDateTimeISO(tz);
    const first = at(lo);
    const t = first.getTimeZoneTransition("next");
    let z: Offsets;
    if (!t || t.epochMilliseconds > hi) {
      z = { lo, hi, tt: null, offBefore: first.offsetNanoseconds / 1e6, offAfter: first.offsetNanoseconds / 1e6 };
    } else {
      const after = t; // getTimeZoneTransition gives the ZonedDateTime at the transition
      const second = after.getTimeZoneTransition("next");
      z = {
        lo,
        hi: second && second.epochMilliseconds < hi ? second.epochMilliseconds - 1 : hi,
        tt: t.epochMilliseconds,
        offBefore: first.offsetNanoseconds / 1e6,
        offAfter: after.offsetNanoseconds / 1e6,
      };
    }
    this.zoneCache = z;
    return z;
  }

  /** The next n fire instants strictly after `afterMs`, in order. */
  next(n: number, afterMs: number, untilMs = Infinity): number[] {
    const cut = (at: number[]) => {
      const i = at.findIndex((x) => x > untilMs);
      return i < 0 ? at : at.slice(0, i);
    };
    const known = this.known(afterMs, n);
    if (known) return cut(known);
    // A bounded question computes no further than its bound, and is not kept.
    const keep = untilMs === Infinity;
    // At least RUN_MIN, kept: the next question a little later is answered from them.
    const want = keep ? Math.max(n, RUN_MIN) : n;
    const out: number[] = [];
    for (let t = afterMs; out.length < want; ) {
      const x = this.compute(t);
      if (x === null || x > untilMs) break;
      out.push(x);
      t = x;
    }
    if (keep) this.run = { from: afterMs, at: out };
    return out.slice(0, n);
  }

  /** "2027-03-14T03:30:00-04:00": an instant as wall-clock time with its UTC offset. */
  local(ms: number): string {
    return Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(this.spec.timezone).toString({ timeZoneName: "never", smallestUnit: "second" });
  }
}

/**
 * Rules by their spec, kept (a bounded cache, cleared when full). A rule keeps the instants it
 * last computed (CronRule.run, CronRule.last), so the schedules on one rule (a tenant's import,
 * every "weekday at 09:00 New York", a 9:00 herd in the generator) compute them once. A spec
 * that throws (CronRuleError) is not kept.
 */
const kept = new BoundedMap<string, CronRule>(10_000);

export function keptRule(spec: CronRuleSpec): CronRule {
  const key = `${spec.cron}\u0000${spec.timezone}\u0000${spec.dst?.gap ?? ""}\u0000${spec.dst?.fold ?? ""}`;
  return kept.getOrMake(key, () => new CronRule(spec));
}

/** The hour field is fixed when it is a number or a list of numbers. */
export function isFixedHour(cron: string): boolean {
  const expr = cron.trim();
  if (expr.startsWith("@")) return FIXED_NICKNAMES.has(expr.toLowerCase());
  const fields = expr.split(/\s+/);
  const hour = fields.length === 6 ? fields[2] : fields[1];
  return /^\d+(,\d+)*$/.test(hour ?? "");
}

export function assertTimeZone(tz: string): void {
  try {
    if (!tz || /^[+-]\d/.test(tz)) throw new Error("offset");
    Temporal.Now.zonedDateTimeISO(tz);
  } catch {
    throw new CronRuleError("timezone", `timezone ${JSON.stringify(tz)} is not an IANA time zone like America/New_York or UTC`);
  }
}
