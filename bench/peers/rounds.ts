/**
 * bench:peers over several rounds. The box's speed moves by half or more within minutes
 * (bench/README.md), and one run measures each system once, one after the other: a ratio
 * taken across the minutes between them says as much about the box as about the systems.
 * Each round runs every system once, in a rotated order; a system's ratio is taken to the
 * best peer *of the same round*, and the table shows the median of those ratios beside the
 * median of the figure itself.
 */

/** The median of the finite values; undefined when there are none. Even counts: the mean of the middle two. */
export function median(xs: readonly (number | undefined)[]): number | undefined {
  const v = xs.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1]! + v[mid]!) / 2;
}

export interface AcrossRounds {
  /** The median of the system's figure over the rounds that have it. */
  value?: number;
  /** The median over rounds of figure / the best peer's figure in that round (none without a peer's figure). */
  ratio?: number;
}

/**
 * One row of the table over rounds: `rounds[r]` maps each system to its figure in round r.
 * The best peer is the highest figure when `higher`, else the lowest; zero and missing
 * figures are no peer's best.
 */
export function acrossRounds(
  rounds: readonly ReadonlyMap<string, number | undefined>[],
  names: readonly string[],
  peers: readonly string[],
  higher: boolean,
): Map<string, AcrossRounds> {
  const ratios = new Map<string, number[]>(names.map((n) => [n, []]));
  for (const round of rounds) {
    const peerValues = peers.map((p) => round.get(p)).filter((v): v is number => v !== undefined && Number.isFinite(v) && v > 0);
    if (peerValues.length === 0) continue;
    const best = higher ? Math.max(...peerValues) : Math.min(...peerValues);
    for (const n of names) {
      const v = round.get(n);
      if (v !== undefined && Number.isFinite(v)) ratios.get(n)!.push(v / best);
    }
  }
  return new Map(names.map((n) => [n, { value: median(rounds.map((r) => r.get(n))), ratio: median(ratios.get(n)!) }]));
}

/** The order systems run in a round: rotated by one each round, so none always runs first (or last) in its round. */
export function roundOrder<T>(systems: readonly T[], round: number): T[] {
  const k = systems.length ? round % systems.length : 0;
  return [...systems.slice(k), ...systems.slice(0, k)];
}
