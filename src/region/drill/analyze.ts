import type { JobRecord } from "./load.ts";
import { generationOf, type TargetCall } from "./target.ts";

/** What the target saw and what the clients were told, with the drill's landmarks. */
export interface AnalysisInput {
  calls: TargetCall[];
  /** The one-off jobs the load tried to create. */
  jobs: JobRecord[];
  /** Path prefix of the schedule's calls. */
  schedulePath: string;
  /** When region A was killed (ms); null if the drill never got there. */
  killAt: number | null;
  /** The generation region B took over with; null if it never did. */
  newGeneration: number | null;
  /** When the old home was brought back (ms); its window runs to the end of the calls. */
  oldRegionFrom: number | null;
}

export interface Analysis {
  jobs_created: number;
  jobs_acknowledged: number;
  jobs_rejected: number;
  jobs_delivered: number;
  lost: number;
  lost_keys: string[];
  delivered_unacknowledged: number;
  duplicates_accepted: number;
  duplicate_keys: string[];
  redelivered_after_crash: number;
  redelivered_keys: string[];
  stale_refused: number;
  early: number;
  early_keys: string[];
  calls_total: number;
  calls_accepted: number;
  calls_without_token: number;
  rto_ms: number | null;
  first_new_call_at: number | null;
  due_before_kill: number;
  outage_due: number;
  outage_due_delivered: number;
  catchup_runs: number;
  /** The catch-up occurrences' keys (<schedule>@<nominal time>) with when they arrived, ms after the kill. */
  catchup_calls: { key: string; after_kill_ms: number | null }[];
  /** The schedule's calls from 3 s before the kill to 5 s after the first call from the new generation: the misfire evidence. */
  ticks_around_outage: { key: string; after_kill_ms: number; generation: number | null; catchup: boolean; accepted: boolean }[];
  ticks_before_kill: number;
  ticks_after_takeover: number;
  misfire_ok: boolean;
  old_region_calls: number;
  old_region_accepted: number;
  delivery_lag_ms: { p50: number; p95: number; max: number } | null;
  passed: boolean;
}

const keyOf = (c: TargetCall) => c.key ?? `webhook-id:${c.webhookId ?? "?"}`;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export function analyze(input: AnalysisInput): Analysis {
  const { calls, jobs, killAt, newGeneration: gNew, oldRegionFrom } = input;
  const isNew = (c: TargetCall) => gNew !== null && c.token !== null && generationOf(c.token) >= gNew;
  const isOld = (c: TargetCall) => c.token !== null && (gNew === null || generationOf(c.token) < gNew);
  const accepted = calls.filter((c) => c.accepted).sort((x, y) => x.at - y.at);

  const byKey = new Map<string, TargetCall[]>();
  for (const c of accepted) {
    const k = keyOf(c);
    const list = byKey.get(k);
    if (list) list.push(c);
    else byKey.set(k, [c]);
  }

  // A key accepted twice is a duplicate, unless it is the documented at-least-once case: a
  // call from the old generation before the kill whose outcome never reached the surviving
  // database, redelivered once by the new generation after it.
  const duplicateKeys: string[] = [];
  const redeliveredKeys: string[] = [];
  for (const [k, list] of byKey) {
    if (list.length < 2) continue;
    const [first, second] = list;
    const crashRedelivery = list.length === 2 && killAt !== null && isOld(first) && first.at < killAt && isNew(second) && second.at >= killAt;
    (crashRedelivery ? redeliveredKeys : duplicateKeys).push(k);
  }

  const acked = jobs.filter((j) => j.ackAt !== null);
  const deliveredAt = (j: JobRecord) => byKey.get(j.key)?.[0]?.at ?? null;
  const lostKeys = acked.filter((j) => deliveredAt(j) === null).map((j) => j.key);
  const deliveredUnacked = jobs.filter((j) => j.ackAt === null && byKey.has(j.key)).length;

  const earlyCalls = accepted.filter((c) => c.scheduledFor !== null && c.at < c.scheduledFor);

  const firstNew = accepted.find(isNew) ?? null;
  const rto = firstNew && killAt !== null ? firstNew.at - killAt : null;

  const outageEnd = firstNew?.at ?? Number.POSITIVE_INFINITY;
  const outageDue = killAt === null ? [] : acked.filter((j) => j.runAt >= killAt && j.runAt < outageEnd);
  const outageDelivered = outageDue.filter((j) => deliveredAt(j) !== null);

  const beforeOld = (c: TargetCall) => oldRegionFrom === null || c.at < oldRegionFrom;
  const ticks = accepted.filter((c) => c.path.startsWith(input.schedulePath) && beforeOld(c));
  const distinct = (cs: TargetCall[]) => new Set(cs.map(keyOf)).size;
  const catchupCalls = ticks.filter((c) => c.catchup);
  const catchups = distinct(catchupCalls);
  const ticksBefore = distinct(ticks.filter((c) => killAt !== null && c.at < killAt));
  const ticksAfter = distinct(ticks.filter((c) => isNew(c) && !c.catchup));
  const misfireOk = catchups <= 1 && ticksAfter >= 1 && outageDelivered.length === outageDue.length;

  const aroundOutage =
    killAt === null
      ? []
      : calls
          .filter((c) => c.path.startsWith(input.schedulePath) && c.at >= killAt - 3000 && c.at <= (firstNew?.at ?? killAt) + 5000)
          .sort((x, y) => x.at - y.at)
          .map((c) => ({
            key: keyOf(c),
            after_kill_ms: c.at - killAt,
            generation: c.token === null ? null : generationOf(c.token),
            catchup: c.catchup,
            accepted: c.accepted,
          }));

  const oldCalls = oldRegionFrom === null ? [] : calls.filter((c) => c.at >= oldRegionFrom && isOld(c));

  const lags = acked
    .map((j) => {
      const at = deliveredAt(j);
      return at === null ? null : at - j.runAt;
    })
    .filter((x): x is number => x !== null)
    .sort((a, b) => a - b);

  const lost = lostKeys.length;
  const duplicates = duplicateKeys.length;
  const early = earlyCalls.length;
  const oldAccepted = oldCalls.filter((c) => c.accepted).length;
  return {
    jobs_created: new Set(jobs.map((j) => j.key)).size,
    jobs_acknowledged: acked.length,
    jobs_rejected: jobs.filter((j) => j.rejected !== null).length,
    jobs_delivered: acked.length - lost,
    lost,
    lost_keys: lostKeys.slice(0, 20),
    delivered_unacknowledged: deliveredUnacked,
    duplicates_accepted: duplicates,
    duplicate_keys: duplicateKeys.slice(0, 20),
    redelivered_after_crash: redeliveredKeys.length,
    redelivered_keys: redeliveredKeys.slice(0, 20),
    stale_refused: calls.filter((c) => !c.accepted).length,
    early,
    early_keys: [...new Set(earlyCalls.map(keyOf))].slice(0, 20),
    calls_total: calls.length,
    calls_accepted: accepted.length,
    calls_without_token: calls.filter((c) => c.token === null).length,
    rto_ms: rto,
    first_new_call_at: firstNew?.at ?? null,
    due_before_kill: killAt === null ? acked.length : acked.filter((j) => j.runAt < killAt).length,
    outage_due: outageDue.length,
    outage_due_delivered: outageDelivered.length,
    catchup_runs: catchups,
    catchup_calls: catchupCalls.slice(0, 20).map((c) => ({ key: keyOf(c), after_kill_ms: killAt === null ? null : c.at - killAt })),
    ticks_around_outage: aroundOutage,
    ticks_before_kill: ticksBefore,
    ticks_after_takeover: ticksAfter,
    misfire_ok: misfireOk,
    old_region_calls: oldCalls.length,
    old_region_accepted: oldAccepted,
    delivery_lag_ms: lags.length ? { p50: pct(lags, 50), p95: pct(lags, 95), max: lags[lags.length - 1] } : null,
    passed: lost === 0 && duplicates === 0 && early === 0 && oldAccepted === 0 && misfireOk,
  };
}
