/**
 * A seeded PRNG (mulberry32): the same seed gives the same fault plan and the same load, so a
 * failing run is replayed with CHAOS_SEED=<seed>. The processes' own timing is not
 * replayable; what is chosen (kinds, targets, instants, durations, jobs) is.
 */
export class Prng {
  private s: number;

  constructor(readonly seed: number) {
    this.s = seed >>> 0;
  }

  /** [0, 1) */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[Math.floor(this.next() * items.length)]!;
  }

  shuffle<T>(items: readonly T[]): T[] {
    const a = [...items];
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  }

  /** A child generator for one concern (load, faults…), so adding draws to one does not shift the other. */
  fork(label: string): Prng {
    let h = this.seed >>> 0;
    for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
    return new Prng(h);
  }
}

/** The seed: CHAOS_SEED / --seed when given, else a fresh one (printed by the caller). */
export function chooseSeed(given: string | undefined): number {
  if (given !== undefined && given !== "") {
    if (!/^\d+$/.test(given) || Number(given) > 0xffffffff) throw new Error(`seed must be a whole number from 0 to 4294967295 (got ${JSON.stringify(given)})`);
    return Number(given);
  }
  return Math.floor(Math.random() * 0xffffffff);
}
