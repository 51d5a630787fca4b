import type { Db } from "../store/db.ts";
import { liveSigningKeys, type LiveSigningKey } from "../store/signing-keys.ts";
import type { Logger } from "../obs/log.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";

export interface SigningKeyringOptions {
  db: Db;
  log: Logger;
  /** SCHEDULER_SIGNING_SECRET: the keys of calls whose schedule and tenant have none. */
  fallback?: Uint8Array;
  /**
   * Reload at least this often: the bound on how late a key change reaches this process
   * when its notification is lost (normally a change arrives by NOTIFY within milliseconds).
   */
  refreshMs: number;
  /** The clock retirements are compared with (the database's: retired_at is on it). */
  now?: () => number;
}

interface Scope {
  own: LiveSigningKey[];
  bySchedule: Map<string, LiveSigningKey[]>;
}

const NONE: readonly Uint8Array[] = Object.freeze([]);

/**
 * Every live signing key of every tenant, in memory: signing is on the hot path (each call),
 * so `keysFor` reads no database. The whole set is reloaded when a key changes (NOTIFY on
 * scheduler_signing_keys, sent in the changing transaction), on every (re)subscription,
 * and at least every refreshMs. A rotation's overlap ends on time without a reload: each
 * key carries its retirement instant, checked per call.
 *
 * A failed reload keeps the keys it had (and is retried by the loop): signing with a key
 * retired a moment ago beats sending unsigned calls. The first load must succeed: a worker
 * does not start calling before it knows which keys to sign with.
 */
export class SigningKeyring extends PeriodicLoop<void> {
  private byTenant = new Map<string, Scope>();
  private unlisten: (() => Promise<void>) | undefined;
  private readonly fallback: readonly Uint8Array[];
  private readonly now: () => number;
  /** Keys loaded at the last reload (for logs and tests). */
  size = 0;
  /** Completed reloads (for tests). */
  loads = 0;

  constructor(private readonly o: SigningKeyringOptions) {
    super("signing-keyring", o.log);
    this.fallback = o.fallback ? Object.freeze([o.fallback]) : NONE;
    this.now = o.now ?? Date.now;
  }

  async begin(): Promise<void> {
    this.unlisten = await this.o.db.listen(
      "scheduler_signing_keys",
      () => this.poke(),
      () => this.poke(),
    );
    await this.reload();
    this.start();
  }

  async end(): Promise<void> {
    await this.stop();
    await this.unlisten?.();
  }

  async runOnce(): Promise<void> {
    await this.reload();
  }

  protected nextDelayMs(): number {
    return this.o.refreshMs * (0.9 + Math.random() * 0.1);
  }

  /**
   * The keys a call of this job is signed with now: its schedule's if it has any live ones,
   * else its tenant's, else the fallback (none: the call goes unsigned).
   */
  keysFor(tenant: string, scheduleId: string | null): readonly Uint8Array[] {
    const scope = this.byTenant.get(tenant);
    if (!scope) return this.fallback;
    const now = this.now();
    if (scheduleId !== null) {
      const own = scope.bySchedule.get(scheduleId);
      if (own) {
        const keys = live(own, now);
        if (keys.length > 0) return keys;
      }
    }
    const keys = live(scope.own, now);
    return keys.length > 0 ? keys : this.fallback;
  }

  private async reload(): Promise<void> {
    const keys = await liveSigningKeys(this.o.db);
    const next = new Map<string, Scope>();
    for (const k of keys) {
      let s = next.get(k.tenant);
      if (!s) next.set(k.tenant, (s = { own: [], bySchedule: new Map() }));
      if (k.schedule_id === null) s.own.push(k);
      else {
        const list = s.bySchedule.get(k.schedule_id);
        if (list) list.push(k);
        else s.bySchedule.set(k.schedule_id, [k]);
      }
    }
    this.byTenant = next;
    this.size = keys.length;
    this.loads++;
  }
}

function live(keys: LiveSigningKey[], now: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const k of keys) if (k.retiresAt === null || k.retiresAt > now) out.push(k.secret);
  return out;
}
