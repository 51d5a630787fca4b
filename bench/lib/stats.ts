/** Nearest-rank percentile of an ascending array; NaN for an empty one. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/**
 * Calls per second in each quarter of an ascending list of call instants (ms), quarters by
 * count: the k-th quarter is the calls from index k·n/4 to (k+1)·n/4, its rate their count over
 * the time from its first call to the first call of the next quarter (the last one: to its
 * own last call). A drain at a constant rate has four equal figures. Fewer than 8 calls: none.
 */
export function quarterRates(sorted: number[]): number[] | undefined {
  const n = sorted.length;
  if (n < 8) return undefined;
  const out: number[] = [];
  for (let q = 0; q < 4; q++) {
    const from = Math.floor((q * n) / 4);
    const to = Math.floor(((q + 1) * n) / 4);
    const end = q < 3 ? sorted[to]! : sorted[n - 1]!;
    const calls = q < 3 ? to - from : to - from - 1;
    const ms = end - sorted[from]!;
    out.push(ms > 0 ? (calls / ms) * 1000 : Number.POSITIVE_INFINITY);
  }
  return out;
}

/** How many of an ascending list of instants (ms) fall in each `stepMs` from `from` on (the ones before `from` in the first). */
export function countsPerStep(sorted: number[], from: number, stepMs: number): number[] {
  const out: number[] = [];
  for (const t of sorted) {
    const i = Math.max(0, Math.floor((t - from) / stepMs));
    while (out.length <= i) out.push(0);
    out[i]++;
  }
  return out;
}

export interface CpuShare {
  /** Percent of one core over the phase (200 = two cores busy). */
  scheduler: number | null;
  bench: number | null;
  /** Everything else that ran on the machine: PostgreSQL, mostly. */
  other: number | null;
  /** Percent of the whole machine that was busy. */
  machineBusy: number | null;
}

export interface PhaseFigures {
  phase: string;
  jobs: number;
  delivered: number;
  missing: number;
  /** Extra calls: a job called k times adds k − 1. */
  duplicates: number;
  /** Calls (first or repeated) that arrived before the job's due_at. */
  early: number;
  /** Jobs whose creation finished only after they were due (the run did not measure them fairly). */
  createdLate: number;
  createSeconds: number;
  firstDue: string;
  lastCall: string | null;
  wallSeconds: number | null;
  deliveriesPerSecond: number | null;
  lagMs: { min: number; p50: number; p99: number; max: number } | null;
  cpu: CpuShare;
}

export interface PhaseInput {
  phase: string;
  due: Map<string, number>;
  arrivals: Map<string, number[]>;
  createdLate: number;
  createSeconds: number;
  cpu: CpuShare;
}

export function phaseFigures(x: PhaseInput): PhaseFigures {
  let firstDue = Infinity;
  let lastCall = -Infinity;
  let duplicates = 0;
  let early = 0;
  const lags: number[] = [];
  for (const [id, due] of x.due) {
    if (due < firstDue) firstDue = due;
    const calls = x.arrivals.get(id);
    if (!calls) continue;
    duplicates += calls.length - 1;
    for (const at of calls) if (at < due) early++;
    lags.push(calls[0] - due);
    if (calls[0] > lastCall) lastCall = calls[0];
  }
  lags.sort((a, b) => a - b);
  const delivered = lags.length;
  const wall = delivered > 0 ? Math.max(0.001, (lastCall - firstDue) / 1000) : null;
  return {
    phase: x.phase,
    jobs: x.due.size,
    delivered,
    missing: x.due.size - delivered,
    duplicates,
    early,
    createdLate: x.createdLate,
    createSeconds: x.createSeconds,
    firstDue: new Date(firstDue).toISOString(),
    lastCall: delivered > 0 ? new Date(lastCall).toISOString() : null,
    wallSeconds: wall,
    deliveriesPerSecond: wall ? x.due.size / wall : null,
    lagMs: delivered > 0 ? { min: lags[0], p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags[lags.length - 1] } : null,
    cpu: x.cpu,
  };
}

/** Left-aligned first column, right-aligned numbers, two spaces between columns. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

const num = (n: number | null | undefined, digits = 0) => (n === null || n === undefined || Number.isNaN(n) ? "-" : n.toFixed(digits));

export function resultsTable(phases: PhaseFigures[]): string {
  return table(
    ["phase", "jobs", "wall s", "deliveries/s", "lag p50 ms", "p99 ms", "max ms", "missing", "dupes", "early"],
    phases.map((p) => [
      p.phase,
      String(p.jobs),
      num(p.wallSeconds, 2),
      num(p.deliveriesPerSecond),
      num(p.lagMs?.p50),
      num(p.lagMs?.p99),
      num(p.lagMs?.max),
      String(p.missing),
      String(p.duplicates),
      String(p.early),
    ]),
  );
}

export function cpuTable(phases: PhaseFigures[], cores: number): string {
  return table(
    ["phase", "scheduler %", "bench %", "others %", `machine busy % of ${cores} cores`],
    phases.map((p) => [p.phase, num(p.cpu.scheduler), num(p.cpu.bench), num(p.cpu.other), num(p.cpu.machineBusy)]),
  );
}

/** The lowest and highest of a figure's rounds, "lo–hi" (one number when they agree at `digits`). */
export function range(xs: number[], digits = 1): string {
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return lo.toFixed(digits) === hi.toFixed(digits) ? lo.toFixed(digits) : `${lo.toFixed(digits)}–${hi.toFixed(digits)}`;
}

export function keyValues(pairs: [string, string][]): string {
  const w = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join("\n");
}
