/** The table a round prints, and the total over rounds. */
import { FAULT_KINDS, type FaultRecord } from "./faults.ts";
import type { CheckResult } from "./invariants.ts";
import type { LatenessFigures } from "./lateness.ts";

export interface RoundStats {
  jobs: number;
  byStatus: Record<string, number>;
  oneOffs: { created: number; acknowledged: number; rejected: number };
  calls: number;
  refused409: number;
  throttled429: number;
  /** Jobs whose target accepted (2xx) more than one call: allowed (at-least-once), counted. */
  duplicateDeliveries: number;
  lostAttempts: number;
  unexpectedExits: string[];
  async: { accepted: number; completed: number; stale: number; gaveUp: number };
  /** Measured outside the faults' windows (lateness.ts); absent when the round did not get that far. */
  lateness?: { creation: LatenessFigures; call: LatenessFigures };
}

const lateRow = (what: string, f: LatenessFigures) => `${what} p99 ${f.p99} ms, max ${f.max} ms (${f.n} measured, ${f.excluded} in fault windows)`;

export interface RoundResult {
  round: number;
  seed: number;
  durationMs: number;
  faults: FaultRecord[];
  checks: CheckResult[];
  stats: RoundStats;
  /** Where the cluster's logs were kept (a round with violations), else null. */
  logs: string | null;
  error: string | null;
}

export const violated = (r: RoundResult) => r.error !== null || r.checks.some((c) => c.violations.length > 0);

const pad = (s: string | number, n: number) => String(s).padEnd(n);
const lpad = (s: string | number, n: number) => String(s).padStart(n);

function faultRows(faults: FaultRecord[]): string[] {
  const rows = [`  ${pad("fault", 24)}${lpad("injected", 9)}${lpad("skipped", 9)}${lpad("failed", 8)}`];
  for (const k of FAULT_KINDS) {
    const of = faults.filter((f) => f.kind === k);
    if (of.length === 0) continue;
    const injected = of.filter((f) => f.startedAt !== null && f.error === null).length;
    const skipped = of.filter((f) => f.skipped !== null).length;
    const failed = of.filter((f) => f.error !== null).length;
    rows.push(`  ${pad(k, 24)}${lpad(injected, 9)}${lpad(skipped, 9)}${lpad(failed, 8)}`);
  }
  const why = [...new Set(faults.filter((f) => f.skipped).map((f) => `${f.kind}: ${f.skipped}`))];
  return [
    ...rows,
    ...why.map((w) => `  skipped ${w}`),
    ...faults.filter((f) => f.error).map((f) => `  failed ${f.kind} at +${((f.startedAt ?? 0) / 1000).toFixed(1)}s: ${f.error}`),
  ];
}

function checkRows(checks: CheckResult[], maxListed: number): string[] {
  const rows: string[] = [];
  for (const c of checks) {
    rows.push(`  ${pad(c.name, 64)}${c.violations.length === 0 ? "held" : `VIOLATED (${c.violations.length})`}`);
    for (const v of c.violations.slice(0, maxListed)) rows.push(`      - ${v}`);
    if (c.violations.length > maxListed) rows.push(`      … ${c.violations.length - maxListed} more`);
  }
  return rows;
}

export function formatRound(r: RoundResult, maxListed = 10): string {
  const s = r.stats;
  const status = Object.entries(s.byStatus)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  return [
    `── chaos round ${r.round}: seed ${r.seed} (replay: CHAOS_SEED=${r.seed}), ${(r.durationMs / 1000).toFixed(1)} s — ${violated(r) ? "VIOLATED" : "all invariants held"}`,
    ...faultRows(r.faults),
    "  invariant",
    ...checkRows(r.checks, maxListed),
    `  jobs ${s.jobs} (${status}); one-offs created ${s.oneOffs.created}, acknowledged ${s.oneOffs.acknowledged}, rejected ${s.oneOffs.rejected}`,
    `  calls ${s.calls} (refused 409 for a lower token ${s.refused409}, answered 429 ${s.throttled429}); jobs delivered more than once ${s.duplicateDeliveries}; attempts lost ${s.lostAttempts}`,
    `  async: accepted ${s.async.accepted}, completed ${s.async.completed}, stale callbacks ${s.async.stale}, callbacks given up ${s.async.gaveUp}`,
    ...(s.lateness ? [`  lateness: ${lateRow("occurrence creation", s.lateness.creation)}; ${lateRow("first call", s.lateness.call)}`] : []),
    `  unexpected process exits ${s.unexpectedExits.length}${s.unexpectedExits.length ? `: ${s.unexpectedExits.slice(0, 5).join("; ")}` : ""}`,
    ...(r.error ? [`  round error: ${r.error}`] : []),
    ...(r.logs ? [`  logs kept in ${r.logs}`] : []),
  ].join("\n");
}

export function formatTotal(rounds: RoundResult[], durationMs: number): string {
  const faults = rounds.flatMap((r) => r.faults);
  const names = rounds[0]?.checks.map((c) => c.name) ?? [];
  const rows = names.map((n) => {
    const bad = rounds.filter((r) => (r.checks.find((c) => c.name === n)?.violations.length ?? 0) > 0);
    const count = bad.reduce((a, r) => a + r.checks.find((c) => c.name === n)!.violations.length, 0);
    return `  ${pad(n, 64)}${bad.length === 0 ? "held" : `VIOLATED ${count}× in rounds ${bad.map((r) => `${r.round} (seed ${r.seed})`).join(", ")}`}`;
  });
  const sum = (f: (s: RoundStats) => number) => rounds.reduce((a, r) => a + f(r.stats), 0);
  return [
    `══ chaos total: ${rounds.length} rounds, ${(durationMs / 60_000).toFixed(1)} min, seeds ${rounds.map((r) => r.seed).join(", ")}`,
    ...faultRows(faults),
    "  invariant",
    ...rows,
    `  jobs ${sum((s) => s.jobs)}, calls ${sum((s) => s.calls)}, refused 409 ${sum((s) => s.refused409)}, delivered more than once ${sum((s) => s.duplicateDeliveries)}, unexpected exits ${sum((s) => s.unexpectedExits.length)}`,
    ...rounds.filter((r) => r.error).map((r) => `  round ${r.round} error: ${r.error}`),
  ].join("\n");
}
