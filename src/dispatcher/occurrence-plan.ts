import type { CronRule } from "../time/cron-rule.ts";
import type { Misfire } from "../store/schedules.ts";

export interface Occurrence {
  nominal: number;
  /** Starts later than its grace after the nominal time: a catch-up run. */
  late: boolean;
  graceMs: number;
  /**
   * Must start within its grace or not at all. fire_once sets it on the on-time occurrences
   * created next to the one catch-up run: one that then starts late (a slow dispatch right
   * after an outage) would be a second catch-up run, so it expires as misfired instead.
   */
  strictStart?: boolean;
}

export interface Plan {
  /** To create, in nominal order (the overlap policy still applies to each). */
  create: Occurrence[];
  /** Occurrences the misfire policy drops (not created). */
  misfired: number;
  /** fire_once: unstarted occurrences older than this give way (expired as misfired). */
  coalesceBefore: number | null;
  /** The next nominal instant not yet considered; null when the rule has ended. */
  nextFireAt: number | null;
  /** Last nominal considered in this pass. */
  lastNominal: number | null;
}

export interface PlanInput {
  rule: CronRule;
  nextFireAt: number;
  nowMs: number;
  misfire: Misfire;
  misfireGraceMs: number | null;
  catchupWindowMs: number;
  endAt: number | null;
  /** Bounds one pass: a long outage is worked through over several passes. */
  maxScan: number;
}

const DEFAULT_GRACE_CAP_MS = 60_000;
const OLD_COUNTED = 1000;

/**
 * Which occurrences from next_fire_at up to now to create, under the misfire policy. An
 * occurrence is missed when it would start later than its grace after its nominal time;
 * nothing older than the catch-up window runs.
 *   skip       only on-time occurrences; missed ones are counted, not created
 *   fire_once  on-time ones, plus the most recent missed one (the rest coalesce into it)
 *   fire_all   every occurrence within the catch-up window
 */
export function planOccurrences(p: PlanInput): Plan {
  const seen: Occurrence[] = [];
  let tooOld = 0;
  let n: number | null = p.nextFireAt;
  let last: number | null = null;
  let scanned = 0;
  while (n !== null && n <= p.nowMs && scanned < p.maxScan) {
    if (p.endAt !== null && n > p.endAt) {
      n = null;
      break;
    }
    scanned++;
    if (p.nowMs - n > p.catchupWindowMs && scanned > OLD_COUNTED) {
      // Far behind (a long pause): occurrences older than the catch-up window never run;
      // jump to the window instead of walking every one (counted: the first OLD_COUNTED).
      tooOld++;
      last = n;
      n = p.rule.nextAfter(p.nowMs - p.catchupWindowMs - 1);
      continue;
    }
    const after = p.rule.nextAfter(n);
    const graceMs = p.misfireGraceMs ?? Math.min(DEFAULT_GRACE_CAP_MS, after === null ? DEFAULT_GRACE_CAP_MS : Math.floor((after - n) / 2));
    if (p.nowMs - n > p.catchupWindowMs) tooOld++;
    else seen.push({ nominal: n, late: p.nowMs - n > graceMs, graceMs });
    last = n;
    n = after;
  }
  if (n !== null && p.endAt !== null && n > p.endAt) n = null;
  const reachedNow = n === null || n > p.nowMs;
  const onTime = seen.filter((o) => !o.late);
  const missed = seen.filter((o) => o.late);
  let create: Occurrence[];
  let misfired = tooOld;
  let coalesceBefore: number | null = null;
  if (p.misfire === "fire_all") {
    create = seen;
  } else if (p.misfire === "skip") {
    create = onTime;
    misfired += missed.length;
  } else if (!reachedNow) {
    // fire_once mid-way through a long backlog: the most recent missed one is not known
    // yet; keep counting, create nothing missed until the pass that reaches now.
    create = onTime;
    misfired += missed.length;
  } else {
    const latest = missed.at(-1);
    create = latest ? [...onTime.map((o) => ({ ...o, strictStart: true })), latest].sort((a, b) => a.nominal - b.nominal) : onTime;
    misfired += Math.max(0, missed.length - 1);
    coalesceBefore = latest?.nominal ?? null;
  }
  return { create, misfired, coalesceBefore, nextFireAt: n, lastNominal: last };
}
