import { type Received, type Responder, Target } from "./target.ts";

/**
 * A fencing-aware webhook target as the README advises: it keeps the highest
 * Scheduler-Fencing-Token seen per job (webhook-id) and answers 409 to a call below it
 * (permanent for the scheduler: the job dies). Other calls get `inner`'s answer. Decisions
 * are made in arrival order, before `inner` runs.
 */
export class PerJobFencingTarget {
  readonly highest = new Map<string, bigint>();
  /** Calls answered 409: each one a legitimate call refused, if the scheduler is right. */
  readonly refused: Received[] = [];
  readonly target: Target;

  constructor(inner: Responder = () => new Response("ok")) {
    this.target = new Target((r, n) => this.decide(r, n, inner));
  }

  private decide(r: Received, n: number, inner: Responder): Response | Promise<Response> {
    const job = r.headers["webhook-id"] ?? "";
    const raw = r.headers["scheduler-fencing-token"] ?? "";
    const token = /^\d+$/.test(raw) ? BigInt(raw) : null;
    const top = this.highest.get(job);
    if (token === null || (top !== undefined && token < top)) {
      this.refused.push(r);
      return new Response("stale fencing token\n", { status: 409 });
    }
    this.highest.set(job, token);
    return inner(r, n);
  }

  get url(): string {
    return this.target.url;
  }

  get calls(): Received[] {
    return this.target.calls;
  }

  stop(): void {
    this.target.stop();
  }
}

/** The fencing token a call carried. */
export const tokenOfCall = (c: Received): bigint => BigInt(c.headers["scheduler-fencing-token"] ?? "-1");
