import type { HostLimits } from "../store/types.ts";
import type { Outcome } from "./classify.ts";
import { type Entry, HostState } from "./host-state.ts";
import { positive } from "./host-lane.ts";

/**
 * Per-target-host flow control in one worker process: a rate (calls per second, evenly
 * spaced) and a concurrency cap (calls in flight), each from the job's host_limits or the
 * settings, the tightest among the jobs in that lane (below) this worker holds; and an adaptive
 * slowdown (AIMD) driven by the host's own answers:
 *
 * - a 429/503 halves the host's allowed rate (from its limit, or from the rate it was being
 *   called at when unlimited), never below the floor; each throttled answer to a call made
 *   after the previous decrease halves it again. Its Retry-After pauses the host outright.
 * - successes raise the allowed rate back linearly (about a fifth of the limit per second)
 *   until it reaches the limit again (for an unlimited host: the rate it had when the
 *   slowdown began), and the slowdown is lifted.
 *
 * A job that cannot start now waits in memory, in order, when its start is expected soon
 * (`admit` → hold; `pump` hands it out once the host has room), and is handed back to the
 * database with a later due time otherwise (`admit` → defer). Hosts are keyed host:port;
 * nothing here ever slows one host for another's answers. Memory is bounded: idle hosts are
 * forgotten, and the number of jobs held is capped.
 *
 * Tenants: the key is a lane (`laneKey`). Calls of jobs without host_limits of their own
 * share the host's lane, paced by the operator's settings (SCHEDULER_HOST_RATE,
 * SCHEDULER_HOST_CONCURRENCY), whatever their tenant. A job whose host_limits set a rate or a
 * concurrency goes in its tenant's own lane to that host: its limits (the tightest among its
 * tenant's jobs held or in flight there) pace that tenant's calls only, never another
 * tenant's (issue 16, hole 7). A lane's 429/503 answers slow that lane.
 */

/** Limits that apply to one job's calls; Infinity: none. */
export interface CallLimits {
  rate: number;
  concurrency: number;
}

export interface HostLimiterSettings {
  /** Default calls per second per host (undefined: unlimited). */
  ratePerSec?: number;
  /** Default calls in flight per host (undefined: unlimited). */
  concurrency?: number;
  /** A slowed host is never paced below this rate (or its own limit, if lower). */
  floorPerSec: number;
  /** Wait in memory when the start is expected within this long; longer waits are handed back. */
  holdMs?: number;
  /** A job held longer than this (a call to its host hangs) is handed back. */
  maxHoldMs?: number;
  /** At most this many jobs held in memory, all hosts together. */
  maxHeld?: number;
  /** A job handed back returns within this long (after a Retry-After pause: after the pause). */
  maxDeferMs?: number;
  /** Hosts idle this long are forgotten (their slowdown with them). */
  idleMs?: number;
  /** At most this many hosts remembered. */
  maxHosts?: number;
  now?: () => number;
  random?: () => number;
}

export type Admission<T> = { kind: "go"; item: T } | { kind: "hold"; item: T; waitMs: number } | { kind: "defer"; item: T; at: number; waitMs: number };

export interface CallEnd {
  outcome: Outcome;
  retryAfterMs: number | null;
  /** When the call started (ms since the epoch): answers to calls made before a decrease do not count twice. */
  startedAt: number;
  durationMs: number;
}

/** How long a call is assumed to take before one has been timed. */
const DEFAULT_CALL_MS = 1000;
/** A job handed back is due again no sooner than this. */
const MIN_DEFER_MS = 250;
/** Successes raise a slowed host back to its limit in about this many seconds. */
const RECOVER_SECONDS = 5;

export class HostLimiter<T> {
  private readonly hosts = new Map<string, HostState<T>>();
  private readonly byId = new Map<string, Entry<T>>();
  /** Hosts with jobs held. */
  private readonly waiting = new Set<HostState<T>>();
  private heldCount = 0;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly holdMs: number;
  private readonly maxHoldMs: number;
  private readonly maxHeld: number;
  private readonly maxDeferMs: number;
  private readonly idleMs: number;
  private readonly maxHosts: number;

  constructor(private readonly s: HostLimiterSettings) {
    this.now = s.now ?? Date.now;
    this.random = s.random ?? Math.random;
    this.holdMs = s.holdMs ?? 2000;
    this.maxHoldMs = s.maxHoldMs ?? 5000;
    this.maxHeld = s.maxHeld ?? 1000;
    this.maxDeferMs = s.maxDeferMs ?? 5000;
    this.idleMs = s.idleMs ?? 60_000;
    this.maxHosts = s.maxHosts ?? 10_000;
  }

  /** A job's limits: its own host_limits, else the settings. */
  limitsOf(own: HostLimits | null | undefined): CallLimits {
    return {
      rate: positive(own?.rate) ?? this.s.ratePerSec ?? Infinity,
      concurrency: positive(own?.concurrency) ?? this.s.concurrency ?? Infinity,
    };
  }

  get held(): number {
    return this.heldCount;
  }

  get size(): number {
    return this.hosts.size;
  }

  /**
   * Go now (a slot is reserved: report the call's end with finish(), or forget() it), wait in
   * memory (pump() hands it out), or be handed back to be due again at `at`.
   */
  admit(host: string, id: string, lim: CallLimits, item: T, now = this.now()): Admission<T> {
    const st = this.state(host, now);
    if (st.queue.length === 0 && this.canStart(st, lim, now)) {
      const e: Entry<T> = { id, lim, item, host: st, phase: "reserved", since: now };
      st.setMember(id, lim);
      this.reserve(e, now);
      this.byId.set(id, e);
      return { kind: "go", item };
    }
    const waitMs = this.estimate(st, lim, st.queue.length, now);
    if (waitMs <= this.holdMs && this.heldCount < this.maxHeld) {
      const e: Entry<T> = { id, lim, item, host: st, phase: "held", since: now };
      st.setMember(id, lim);
      st.queue.push(e);
      this.byId.set(id, e);
      this.heldCount++;
      this.waiting.add(st);
      return { kind: "hold", item, waitMs };
    }
    return { kind: "defer", item, at: this.deferAt(st, lim, waitMs, now), waitMs };
  }

  /**
   * Held jobs whose host has room now (their slots reserved, in the order they came), and
   * held jobs that waited too long (no longer held: hand them back, due again at `at`).
   */
  pump(now = this.now()): { ready: T[]; overdue: { item: T; at: number }[] } {
    const ready: T[] = [];
    const overdue: { item: T; at: number }[] = [];
    for (const st of [...this.waiting]) {
      while (st.queue.length > 0 && this.canStart(st, st.queue[0]!.lim, now)) {
        const e = st.queue.shift()!;
        this.heldCount--;
        e.phase = "reserved";
        this.reserve(e, now);
        ready.push(e.item);
      }
      for (let i = 0; i < st.queue.length; i++) {
        const e = st.queue[i]!;
        if (now - e.since < this.maxHoldMs) continue;
        st.queue.splice(i--, 1);
        this.heldCount--;
        this.byId.delete(e.id);
        st.dropMember(e.id);
        overdue.push({ item: e.item, at: this.deferAt(st, e.lim, this.estimate(st, e.lim, st.queue.length, now), now) });
      }
      if (st.queue.length === 0) this.waiting.delete(st);
    }
    return { ready, overdue };
  }

  /**
   * When held jobs may next be able to go without a call finishing (a rate slot or the end
   * of a pause), or when one has been held too long; Infinity if none.
   */
  nextWakeAt(now = this.now()): number {
    let at = Infinity;
    for (const st of this.waiting) {
      const head = st.queue[0];
      if (!head) continue;
      at = Math.min(at, head.since + this.maxHoldMs);
      const rate = st.allowed(head.lim);
      const t = Math.max(st.pausedUntil, Number.isFinite(rate) ? st.tat : 0);
      if (t > now) at = Math.min(at, t);
      else if (st.inflight < st.limits(head.lim).concurrency) at = Math.min(at, now);
    }
    return at;
  }

  /** Held jobs for which `drop` says so are no longer held (a cancel, a lost lease). */
  removeHeld(drop: (item: T) => boolean): T[] {
    const out: T[] = [];
    for (const st of [...this.waiting]) {
      for (let i = 0; i < st.queue.length; i++) {
        const e = st.queue[i]!;
        if (!drop(e.item)) continue;
        st.queue.splice(i--, 1);
        this.unhold(e);
        out.push(e.item);
      }
      if (st.queue.length === 0) this.waiting.delete(st);
    }
    return out;
  }

  /** Every held job, no longer held (a stop). */
  drainHeld(): T[] {
    return this.removeHeld(() => true);
  }

  /** Undoes an admission without a call (not started after all); no-op when unknown. */
  forget(id: string): void {
    const e = this.byId.get(id);
    if (!e) return;
    const st = e.host;
    if (e.phase === "held") {
      const i = st.queue.indexOf(e);
      if (i >= 0) st.queue.splice(i, 1);
      if (st.queue.length === 0) this.waiting.delete(st);
      this.unhold(e);
      return;
    }
    this.byId.delete(id);
    st.inflight--;
    st.dropMember(id);
  }

  /** A call ended: frees its slot and adapts the host's rate. Returns true if the host's throttled state changed. */
  finish(id: string, end: CallEnd, now = this.now()): boolean {
    const e = this.byId.get(id);
    if (e?.phase !== "reserved") return false;
    const st = e.host;
    const was = this.isThrottled(st, now);
    st.lastUsed = now;
    st.avgCallMs = st.avgCallMs === null ? end.durationMs : st.avgCallMs * 0.8 + end.durationMs * 0.2;
    if (end.outcome === "throttled") {
      const pause = end.retryAfterMs !== null && end.retryAfterMs > 0;
      if (end.startedAt >= st.lastDecreaseAt) this.decrease(st, now, !pause);
      // The host said when: the first call after the pause may go right then, the next ones
      // are spaced at the slowed rate.
      if (pause) st.pausedUntil = Math.max(st.pausedUntil, now + end.retryAfterMs!);
    } else if (end.outcome === "success" && st.adaptive !== null && end.startedAt >= st.lastDecreaseAt) {
      this.increase(st);
    }
    this.byId.delete(id);
    st.inflight--;
    st.dropMember(id);
    return was !== this.isThrottled(st, now);
  }

  /** Hosts slowed below their limit or paused by a Retry-After. */
  throttledHosts(now = this.now()): number {
    let n = 0;
    for (const st of this.hosts.values()) if (this.isThrottled(st, now)) n++;
    return n;
  }

  /** Forgets idle hosts (beyond maxHosts, the longest idle first, even slowed or paused ones). */
  sweep(now = this.now()): void {
    for (const [k, st] of this.hosts) {
      if (st.idle() && now - st.lastUsed >= this.idleMs && st.pausedUntil <= now) this.hosts.delete(k);
    }
    if (this.hosts.size <= this.maxHosts) return;
    const idle = [...this.hosts.values()].filter((st) => st.idle()).sort((a, b) => a.lastUsed - b.lastUsed);
    for (const st of idle) {
      if (this.hosts.size <= this.maxHosts) break;
      this.hosts.delete(st.key);
    }
  }

  /** The end of the host's Retry-After pause (0 or a past instant: none). */
  pausedUntil(host: string): number {
    return this.hosts.get(host)?.pausedUntil ?? 0;
  }

  /** For tests and logs: the rate a call to this host without host_limits would be paced at now (Infinity: unlimited). */
  allowedRate(host: string): number {
    const dflt = this.limitsOf(null);
    return this.hosts.get(host)?.allowed(dflt) ?? dflt.rate;
  }

  private isThrottled(st: HostState<T>, now: number): boolean {
    return st.throttled || st.pausedUntil > now;
  }

  private unhold(e: Entry<T>): void {
    this.heldCount--;
    this.byId.delete(e.id);
    e.host.dropMember(e.id);
  }

  private state(host: string, now: number): HostState<T> {
    let st = this.hosts.get(host);
    if (!st) {
      if (this.hosts.size >= this.maxHosts) this.sweep(now);
      st = new HostState<T>(host, now);
      this.hosts.set(host, st);
    }
    st.lastUsed = now;
    return st;
  }

  private canStart(st: HostState<T>, lim: CallLimits, now: number): boolean {
    if (now < st.pausedUntil) return false;
    if (st.inflight >= st.limits(lim).concurrency) return false;
    return !Number.isFinite(st.allowed(lim)) || now >= st.tat;
  }

  private reserve(e: Entry<T>, now: number): void {
    const st = e.host;
    const rate = st.allowed(e.lim);
    st.tat = Number.isFinite(rate) ? Math.max(st.tat, now) + 1000 / rate : now;
    st.lastStart = now;
    st.inflight++;
    st.countCall(now);
    st.lastUsed = now;
  }

  /** Expected wait before a job at `position` in the host's queue can go. */
  private estimate(st: HostState<T>, lim: CallLimits, position: number, now: number): number {
    const rate = st.allowed(lim);
    const conc = st.limits(lim).concurrency;
    const start = Math.max(now, st.pausedUntil, Number.isFinite(rate) ? st.tat : 0);
    const rateWait = start - now + (Number.isFinite(rate) ? (position * 1000) / rate : 0);
    let concWait = 0;
    const ahead = st.inflight + position;
    if (Number.isFinite(conc) && ahead >= conc) concWait = (Math.floor((ahead - conc) / conc) + 1) * (st.avgCallMs ?? DEFAULT_CALL_MS);
    return Math.max(rateWait, concWait);
  }

  /**
   * When a job handed back should be due again: its expected turn, spread behind the others
   * handed back for this host, but within maxDeferMs of now (or of the end of a pause), so
   * that a host that recovers sooner than expected is not left idle for long.
   */
  private deferAt(st: HostState<T>, lim: CallLimits, waitMs: number, now: number): number {
    const rate = st.allowed(lim);
    const conc = st.limits(lim).concurrency;
    const spacing = Number.isFinite(rate) ? 1000 / rate : Number.isFinite(conc) ? (st.avgCallMs ?? DEFAULT_CALL_MS) / conc : 0;
    const base = Math.max(now, st.pausedUntil);
    let at = Math.max(now + waitMs, st.deferCursor);
    if (at - base > this.maxDeferMs) at = base + this.maxDeferMs * (0.5 + 0.5 * this.random());
    else st.deferCursor = at + spacing;
    return Math.max(at, now + MIN_DEFER_MS);
  }

  private decrease(st: HostState<T>, now: number, space: boolean): void {
    const limit = st.limits().rate;
    const floor = Math.min(this.s.floorPerSec, limit);
    const current = st.adaptive !== null ? Math.min(st.adaptive, limit) : Math.min(limit, Math.max(st.observedRate(now), floor));
    const next = Math.max(floor, current / 2);
    if (st.adaptive === null) st.recoverTo = Number.isFinite(limit) ? limit : Math.max(current, 2 * floor);
    st.adaptive = next;
    st.lastDecreaseAt = now;
    if (space) st.tat = Math.max(st.tat, now + 1000 / next);
  }

  private increase(st: HostState<T>): void {
    const limit = st.limits().rate;
    const ceiling = Number.isFinite(limit) ? limit : st.recoverTo;
    const a = st.adaptive!;
    // About ceiling / RECOVER_SECONDS more per second (a host paced at a calls/s answers
    // about a successes a second): each success adds its share of that.
    const next = a + Math.max(ceiling / RECOVER_SECONDS, this.s.floorPerSec) / Math.max(a, 1);
    if (next >= ceiling) {
      st.adaptive = null;
      st.recoverTo = Infinity;
    } else {
      st.adaptive = next;
    }
    // The next call is spaced from the last one at the raised rate, not the old one.
    const rate = st.allowed();
    st.tat = Math.min(st.tat, Number.isFinite(rate) ? st.lastStart + 1000 / rate : st.lastStart);
  }
}
