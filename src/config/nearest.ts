/**
 * The candidate closest to `name` by edit distance, counting a swap of two neighbouring
 * characters as one edit (the optimal string alignment distance): SCHEDULER_POLL_INTERAVL is
 * one edit from SCHEDULER_POLL_INTERVAL. A candidate may be compared in several forms (its
 * closest counts); ties go to the earlier candidate.
 */
export function nearest(name: string, candidates: readonly string[], formsOf: (candidate: string) => string[] = (c) => [c]): string {
  let best = candidates[0]!;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = Math.min(...formsOf(c).map((form) => distance(name, form)));
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

export function distance(a: string, b: string): number {
  // Rows i-2, i-1 and i of the usual table, reused.
  let before = new Array<number>(b.length + 1).fill(0);
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  let cur = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    cur[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) cur[j] = Math.min(cur[j]!, before[j - 2]! + 1);
    }
    [before, prev, cur] = [prev, cur, before];
  }
  return prev[b.length]!;
}
