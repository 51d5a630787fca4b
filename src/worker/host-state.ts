/**
 * One lane's state in a worker's HostLimiter (a target host, or one tenant's own lane to it,
 * see laneKey): the calls in flight, the jobs held for
 * it in order, its pacing (next allowed start), a Retry-After pause, the adaptive slowdown,
 * and the tightest limits among the jobs to it.
 */
import type { CallLimits } from "./host-limiter.ts";

export interface Entry<T> {
  id: string;
  lim: CallLimits;
  item: T;
  host: HostState<T>;
  phase: "held" | "reserved";
  since: number;
}

export class HostState<T> {
  /** Reserved or calling. */
  inflight = 0;
  /** Limits of the lane's jobs held or in flight: the tightest applies to every call in the lane. */
  readonly members = new Map<string, CallLimits>();
  readonly queue: Entry<T>[] = [];
  /** No call before this instant (rate pacing). */
  tat = 0;
  /** The last call's start (its slot reserved). */
  lastStart = 0;
  /** Retry-After: no call at all before this instant. */
  pausedUntil = 0;
  /** Slowed rate, calls/s; null: not slowed. */
  adaptive: number | null = null;
  /** An unlimited host's slowdown lifts once it is back to this rate. */
  recoverTo = Infinity;
  lastDecreaseAt = 0;
  /** Jobs handed back are spread from here. */
  deferCursor = 0;
  avgCallMs: number | null = null;
  lastUsed: number;
  // Calls counted in one-second buckets, for the rate an unlimited host was being called at.
  private bucket = 0;
  private cur = 0;
  private prev = 0;
  // How many members have each rate and concurrency: few distinct values (the settings and
  // the overrides in use), so the tightest is cheap to find however many jobs there are.
  private readonly rates = new Map<number, number>();
  private readonly concs = new Map<number, number>();
  private dirty = true;
  private rateLimit = Infinity;
  private concLimit = Infinity;

  constructor(
    readonly key: string,
    now: number,
  ) {
    this.lastUsed = now;
  }

  private refresh(): void {
    if (!this.dirty) return;
    this.rateLimit = smallestKey(this.rates);
    this.concLimit = smallestKey(this.concs);
    this.dirty = false;
  }

  // The tightest limits change only when a value comes or goes, not with every job that
  // shares one (every call in a burst to one host would otherwise recompute them twice).
  setMember(id: string, lim: CallLimits): void {
    if (this.members.has(id)) this.dropMember(id);
    this.members.set(id, lim);
    if (bump(this.rates, lim.rate, 1)) this.dirty = true;
    if (bump(this.concs, lim.concurrency, 1)) this.dirty = true;
  }

  dropMember(id: string): void {
    const lim = this.members.get(id);
    if (!lim) return;
    this.members.delete(id);
    if (bump(this.rates, lim.rate, -1)) this.dirty = true;
    if (bump(this.concs, lim.concurrency, -1)) this.dirty = true;
  }

  /** The configured limits (tightest of the members, and of `lim` if given). */
  limits(lim?: CallLimits): CallLimits {
    this.refresh();
    return {
      rate: Math.min(this.rateLimit, lim?.rate ?? Infinity),
      concurrency: Math.min(this.concLimit, lim?.concurrency ?? Infinity),
    };
  }

  /** The rate calls are paced at now: the limit, or lower while slowed. */
  allowed(lim?: CallLimits): number {
    return Math.min(this.limits(lim).rate, this.adaptive ?? Infinity);
  }

  countCall(now: number): void {
    this.roll(now);
    this.cur++;
  }

  /** Calls per second over about the last second. */
  observedRate(now: number): number {
    this.roll(now);
    const frac = (now % 1000) / 1000;
    return this.prev * (1 - frac) + this.cur;
  }

  private roll(now: number): void {
    const b = Math.floor(now / 1000);
    if (b === this.bucket) return;
    this.prev = b === this.bucket + 1 ? this.cur : 0;
    this.cur = 0;
    this.bucket = b;
  }

  get throttled(): boolean {
    return this.adaptive !== null;
  }

  idle(): boolean {
    return this.inflight === 0 && this.queue.length === 0 && this.members.size === 0;
  }
}

/** Counts `k` up or down; true when `k` came or went (the set of keys changed). */
function bump(m: Map<number, number>, k: number, d: number): boolean {
  const was = m.get(k) ?? 0;
  const n = was + d;
  if (n > 0) m.set(k, n);
  else m.delete(k);
  return was === 0 || n <= 0;
}

function smallestKey(m: Map<number, number>): number {
  let min = Infinity;
  for (const k of m.keys()) if (k < min) min = k;
  return min;
}
