/**
 * Which due jobs to claim now, when more are due than there is room for: fair between
 * priority classes (weighted), fair between tenants (round robin), within each tenant's
 * quotas and the global dispatch rate, oldest first inside each (tenant, class).
 *
 * Classes: priority > 0 is high, 0 normal, < 0 low; catch-up runs (late by misfire or outage
 * recovery) and dead-letter replays count one class lower than their priority says. Aging
 * bounds every wait: a job late by k × agingMs is k classes higher, so after 2 × agingMs it
 * competes with the highest class, oldest first. Weights share the batch between classes that have work:
 * with 8:3:1, sustained high-priority load still leaves low priority 1 slot in 12.
 *
 * Pure: the dispatcher gives it candidates (a bounded sample per tenant and class, from
 * SQL) and the in-flight count per tenant, and claims what it returns by id.
 */
import { RateBucket } from "./rate-bucket.ts";
import { BoundedMap } from "../bounded-map.ts";

export interface Candidate {
  id: string;
  tenant: string;
  priority: number;
  dueMs: number;
  /** A catch-up run (late by misfire policy or outage recovery) or a dead-letter replay. */
  catchup: boolean;
}

export interface TenantQuota {
  /** Jobs of the tenant queued or running at once, at most. */
  maxRunning?: number;
  /** Dispatches per second, at most. */
  ratePerSec?: number;
  /** Schedules the tenant may have (checked by the API, not here). */
  maxSchedules?: number;
}

export interface PlannerSettings {
  /** Weights of the high, normal and low classes. */
  weights: { high: number; normal: number; low: number };
  agingMs: number;
  /** Quota of every tenant without an override. */
  tenantDefault: TenantQuota;
  tenantOverrides: Record<string, TenantQuota>;
  /** Dispatches per second across all tenants, at most (undefined: no limit). */
  globalRatePerSec?: number;
}

export type PriorityClass = 0 | 1 | 2;
const CLASSES: PriorityClass[] = [2, 1, 0];

function baseClassOf(c: Candidate): number {
  return (c.priority > 0 ? 2 : c.priority === 0 ? 1 : 0) - (c.catchup ? 1 : 0);
}

export function classOf(c: Candidate, nowMs: number, agingMs: number): PriorityClass {
  const aged = agingMs > 0 ? Math.floor(Math.max(0, nowMs - c.dueMs) / agingMs) : 0;
  return Math.max(0, Math.min(2, baseClassOf(c) + aged)) as PriorityClass;
}

export interface PlanInput {
  candidates: Candidate[];
  /** At most this many (room in workers, queue space). */
  limit: number;
  nowMs: number;
  /** Jobs queued or running per tenant right now (absent: 0). */
  inFlight: ReadonlyMap<string, number>;
}

export class DispatchPlanner {
  private readonly global: RateBucket | undefined;
  // Idle tenants' buckets are full again within a second: forgetting them loses nothing.
  private readonly tenantBuckets = new BoundedMap<string, RateBucket>(10_000);
  /**
   * The weighted round robin's running credit per class, kept across passes: with room for
   * one or two jobs a pass, a fresh start every pass would always serve the heaviest class.
   */
  private readonly credit = [0, 0, 0];
  /** Per class, the tenant served last: the next pass starts after it. */
  private readonly lastServed: (string | undefined)[] = [undefined, undefined, undefined];

  constructor(
    readonly settings: PlannerSettings,
    private readonly clock: () => number = () => performance.now(),
  ) {
    if (settings.globalRatePerSec !== undefined) this.global = new RateBucket(settings.globalRatePerSec, clock);
  }

  quotaOf(tenant: string): TenantQuota {
    return { ...this.settings.tenantDefault, ...this.settings.tenantOverrides[tenant] };
  }

  /** Whether any quota or rate applies (the dispatcher then needs in-flight counts). */
  get hasTenantRunningQuota(): boolean {
    return this.settings.tenantDefault.maxRunning !== undefined || Object.values(this.settings.tenantOverrides).some((q) => q.maxRunning !== undefined);
  }

  /** Whether nothing of the planner's can hold back this tenant's jobs: no quota or rate of its own, no global rate. */
  unlimited(tenant: string): boolean {
    if (this.global) return false;
    const q = this.quotaOf(tenant);
    return q.maxRunning === undefined && q.ratePerSec === undefined;
  }

  /** Milliseconds until the global rate allows a dispatch again (0: now). */
  msUntilGlobalToken(): number {
    return this.global?.msUntilToken() ?? 0;
  }

  /** The jobs to claim, in claim order. Takes no tokens: call commit() with what was claimed. */
  plan(input: PlanInput): Candidate[] {
    let limit = Math.max(0, Math.floor(input.limit));
    if (this.global) limit = Math.min(limit, this.global.available());
    if (limit === 0 || input.candidates.length === 0) return [];

    // Room per tenant: in-flight quota and rate, whichever is tighter.
    const room = new Map<string, number>();
    const roomOf = (tenant: string): number => {
      let r = room.get(tenant);
      if (r === undefined) {
        const q = this.quotaOf(tenant);
        r = Infinity;
        if (q.maxRunning !== undefined) r = Math.min(r, q.maxRunning - (input.inFlight.get(tenant) ?? 0));
        if (q.ratePerSec !== undefined) r = Math.min(r, this.bucketOf(tenant, q.ratePerSec).available());
        r = Math.max(0, r);
        room.set(tenant, r);
      }
      return r;
    };

    // Per class: tenant → its candidates, oldest first; among jobs just as old, those that
    // aging raised into the class first. A burst of high and low jobs due at one instant ages
    // into the top class together; ordered by id there, the low ones would wait for every
    // high one (their class's weighted share no longer protects them), and aging would
    // lengthen their wait instead of bounding it.
    const queues: Map<string, Candidate[]>[] = [new Map(), new Map(), new Map()];
    const lift = new Map<Candidate, number>();
    for (const c of input.candidates) {
      const k = classOf(c, input.nowMs, this.settings.agingMs);
      lift.set(c, k - baseClassOf(c));
      const q = queues[k]!;
      const list = q.get(c.tenant);
      if (list) list.push(c);
      else q.set(c.tenant, [c]);
    }
    const order = (a: Candidate, b: Candidate) => a.dueMs - b.dueMs || lift.get(b)! - lift.get(a)! || (a.id < b.id ? -1 : 1);
    for (const q of queues) for (const list of q.values()) list.sort(order);

    const weight = [this.settings.weights.low, this.settings.weights.normal, this.settings.weights.high];
    const current = this.credit;
    const picked: Candidate[] = [];
    const taken = new Set<string>();
    // Smooth weighted round robin over the classes that still have work (nginx's): each
    // turn every class gains its weight, the richest serves one job and pays the total.
    while (picked.length < limit) {
      const live = CLASSES.filter((k) => this.hasServable(queues[k]!, roomOf));
      if (live.length === 0) break;
      const total = live.reduce<number>((s, k) => s + weight[k]!, 0);
      let best = live[0]!;
      for (const k of live) {
        current[k]! += weight[k]!;
        if (current[k]! > current[best]!) best = k;
      }
      current[best]! -= total;
      const c = this.serveOne(best, queues[best]!, roomOf);
      if (!c || taken.has(c.id)) continue;
      taken.add(c.id);
      room.set(c.tenant, roomOf(c.tenant) - 1);
      picked.push(c);
    }
    return picked;
  }

  /** Takes rate tokens for what was claimed. */
  commit(claimed: { tenant: string }[]): void {
    if (claimed.length === 0) return;
    this.global?.take(claimed.length);
    const per = new Map<string, number>();
    for (const c of claimed) per.set(c.tenant, (per.get(c.tenant) ?? 0) + 1);
    for (const [tenant, n] of per) {
      const rate = this.quotaOf(tenant).ratePerSec;
      if (rate !== undefined) this.bucketOf(tenant, rate).take(n);
    }
  }

  private bucketOf(tenant: string, rate: number): RateBucket {
    let b = this.tenantBuckets.get(tenant);
    if (!b || b.ratePerSec !== rate) {
      b = new RateBucket(rate, this.clock);
      this.tenantBuckets.set(tenant, b);
    }
    return b;
  }

  private hasServable(q: Map<string, Candidate[]>, roomOf: (t: string) => number): boolean {
    for (const [tenant, list] of q) if (list.length > 0 && roomOf(tenant) > 0) return true;
    return false;
  }

  /** The next tenant after the one served last in this class, round robin; its oldest job. */
  private serveOne(k: PriorityClass, q: Map<string, Candidate[]>, roomOf: (t: string) => number): Candidate | undefined {
    const tenants = [...q.keys()].filter((t) => q.get(t)!.length > 0 && roomOf(t) > 0).sort();
    if (tenants.length === 0) return undefined;
    const last = this.lastServed[k];
    const next = tenants.find((t) => last === undefined || t > last) ?? tenants[0]!;
    this.lastServed[k] = next;
    return q.get(next)!.shift();
  }
}
