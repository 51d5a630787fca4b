/**
 * The drill's webhook target: records every call and keeps the highest fencing token seen.
 * A call with a lower token is answered 409 (refused, never accepted); any other call 200.
 * A call without a token is accepted and counted apart (the scheduler always sends one).
 */
export interface TargetCall {
  /** Arrival, ms since the epoch (this machine's clock, as the scheduler's). */
  at: number;
  path: string;
  key: string | null;
  webhookId: string | null;
  /** Scheduler-Fencing-Token; null when absent or not an integer. */
  token: bigint | null;
  /** Scheduler-Scheduled-For, ms; null when absent or unparseable. */
  scheduledFor: number | null;
  nominalTime: string | null;
  catchup: boolean;
  attempt: number | null;
  accepted: boolean;
}

/** The generation half of a fencing token (generation × 2^32 + term). */
export const generationOf = (token: bigint): number => Number(token >> 32n);

export class DrillTarget {
  readonly calls: TargetCall[] = [];
  /** The highest token seen so far (refused calls never raise it: they are lower). */
  highest: bigint | null = null;
  private server: ReturnType<typeof Bun.serve>;
  private listeners = new Set<(c: TargetCall) => void>();

  constructor() {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: (req) => {
        const call = this.record(req);
        for (const l of this.listeners) l(call);
        return call.accepted ? new Response("ok") : new Response("stale fencing token\n", { status: 409 });
      },
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  /** Decides and records in one synchronous step, so decisions follow arrival order. */
  private record(req: Request): TargetCall {
    const h = req.headers;
    const rawToken = h.get("scheduler-fencing-token");
    const token = rawToken !== null && /^\d+$/.test(rawToken.trim()) ? BigInt(rawToken.trim()) : null;
    const sf = h.get("scheduler-scheduled-for");
    const sfMs = sf ? Date.parse(sf) : NaN;
    const attempt = Number(h.get("scheduler-attempt"));
    const accepted = token === null || this.highest === null || token >= this.highest;
    if (accepted && token !== null) this.highest = token;
    const call: TargetCall = {
      at: Date.now(),
      path: new URL(req.url).pathname,
      key: h.get("idempotency-key"),
      webhookId: h.get("webhook-id"),
      token,
      scheduledFor: Number.isFinite(sfMs) ? sfMs : null,
      nominalTime: h.get("scheduler-nominal-time"),
      catchup: h.get("scheduler-catchup") === "true",
      attempt: Number.isInteger(attempt) && attempt > 0 ? attempt : null,
      accepted,
    };
    this.calls.push(call);
    return call;
  }

  /** Calls `fn` for every call from now on; returns the unsubscribe. */
  onCall(fn: (c: TargetCall) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Resolves with the first call (already seen or future) matching `pred`, or null after `ms`. */
  waitFor(pred: (c: TargetCall) => boolean, ms: number): Promise<TargetCall | null> {
    const seen = this.calls.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => {
      const off = this.onCall((c) => {
        if (!pred(c)) return;
        clearTimeout(t);
        off();
        resolve(c);
      });
      const t = setTimeout(() => {
        off();
        resolve(null);
      }, ms);
    });
  }

  get accepted(): number {
    return this.calls.filter((c) => c.accepted).length;
  }

  get refused(): number {
    return this.calls.filter((c) => !c.accepted).length;
  }

  stop(): void {
    this.server.stop(true);
  }
}
