/**
 * The chaos suite's webhook target, fencing-aware as a careful target would be: it records
 * every call (arrival, path, webhook-id, Idempotency-Key, Scheduler-Fencing-Token,
 * Scheduler-Attempt, nominal time), keeps the highest token seen per job and answers 409 to
 * a lower one (refused, never acted on). What it does otherwise is named by the path:
 *
 *   [/fail/<n>][/slow/<ms>][/async][/t429]/j/<key> | /s/<schedule id>
 *
 * fail: answers the first <n> calls of each job 500 (a retry chain: attempts before and after
 * a fault, so fencing tokens are compared across it);
 * slow: answers after <ms>; async: answers 202 and then heartbeats and completes the job
 * through the API (following fly-replay to the home region, retrying through outages);
 * t429: answers the first call of each job 429 with Retry-After: 1. Two listeners share one
 * log: `url` and `throttledUrl` (another host:port, the one jobs with host_limits call).
 */
export interface ChaosCall {
  /** Arrival, ms since the epoch: this host's clock, which is also the database's. */
  at: number;
  path: string;
  port: number;
  webhookId: string | null;
  key: string | null;
  token: bigint | null;
  attempt: number | null;
  nominal: string | null;
  status: number;
}

export interface AsyncStats {
  accepted: number;
  completed: number;
  /** The API answered 409 to a heartbeat or completion (the attempt had ended: lease lapsed, rerun). */
  stale: number;
  /** Gave up retrying through an outage; the lease lapses and the job runs again. */
  gaveUp: number;
}

interface Flags {
  failFirst: number;
  slowMs: number;
  async: boolean;
  t429: boolean;
}

function flagsOf(path: string): Flags {
  const seg = path.split("/").filter(Boolean);
  const f: Flags = { failFirst: 0, slowMs: 0, async: false, t429: false };
  for (let i = 0; i < seg.length; i++) {
    if (seg[i] === "fail") f.failFirst = Number(seg[++i]) || 0;
    else if (seg[i] === "slow") f.slowMs = Number(seg[++i]) || 0;
    else if (seg[i] === "async") f.async = true;
    else if (seg[i] === "t429") f.t429 = true;
    else break;
  }
  return f;
}

export class ChaosTarget {
  readonly calls: ChaosCall[] = [];
  readonly highest = new Map<string, bigint>();
  readonly asyncStats: AsyncStats = { accepted: 0, completed: 0, stale: 0, gaveUp: 0 };
  private servers: ReturnType<typeof Bun.serve>[];
  private throttled = new Set<string>();
  private failed = new Map<string, number>();
  private stopped = false;

  /** `api(path, body)`: POST to the home region's API (the caller knows the regions). */
  constructor(private readonly api: (path: string, body: unknown) => Promise<{ status: number } | null>) {
    const serve = () => Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: 0, fetch: (req, server) => this.handle(req, server.port!) });
    this.servers = [serve(), serve()];
  }

  get url(): string {
    return `http://127.0.0.1:${this.servers[0]!.port}`;
  }

  get throttledUrl(): string {
    return `http://127.0.0.1:${this.servers[1]!.port}`;
  }

  private async handle(req: Request, port: number): Promise<Response> {
    // Everything up to the decision is synchronous: decisions follow arrival order.
    const at = Date.now();
    const h = req.headers;
    const path = new URL(req.url).pathname;
    const raw = h.get("scheduler-fencing-token")?.trim() ?? null;
    const token = raw !== null && /^\d+$/.test(raw) ? BigInt(raw) : null;
    const webhookId = h.get("webhook-id");
    const attempt = Number(h.get("scheduler-attempt"));
    const flags = flagsOf(path);
    let status = 200;
    const top = webhookId ? this.highest.get(webhookId) : undefined;
    if (token !== null && top !== undefined && token < top) status = 409;
    else {
      if (webhookId && token !== null) this.highest.set(webhookId, token);
      const failedSoFar = webhookId ? (this.failed.get(webhookId) ?? 0) : 0;
      if (webhookId && failedSoFar < flags.failFirst) {
        this.failed.set(webhookId, failedSoFar + 1);
        status = 500;
      } else if (flags.t429 && webhookId && !this.throttled.has(webhookId)) {
        this.throttled.add(webhookId);
        status = 429;
      } else if (flags.async) status = 202;
    }
    this.calls.push({
      at,
      path,
      port,
      webhookId,
      key: h.get("idempotency-key"),
      token,
      attempt: Number.isInteger(attempt) && attempt > 0 ? attempt : null,
      nominal: h.get("scheduler-nominal-time"),
      status,
    });
    if (status === 409) return new Response("stale fencing token\n", { status });
    if (status === 429) return new Response("slow down\n", { status, headers: { "retry-after": "1" } });
    if (status === 500) return new Response("failing on purpose\n", { status });
    if (flags.slowMs > 0) await Bun.sleep(flags.slowMs);
    if (status === 202) {
      this.asyncStats.accepted++;
      void this.finishAsync(webhookId!, h.get("scheduler-lease-token") ?? "");
    }
    return new Response("ok\n", { status });
  }

  /** The async job's work: a heartbeat, then the completion, each retried through outages. */
  private async finishAsync(jobId: string, leaseToken: string): Promise<void> {
    await Bun.sleep(300);
    const hb = await this.retrying(`/v1/jobs/${jobId}/heartbeat`, { lease_token: leaseToken, checkpoint: { step: 1 } });
    if (hb !== 200) return;
    await Bun.sleep(400);
    const done = await this.retrying(`/v1/jobs/${jobId}/complete`, { lease_token: leaseToken, outcome: "succeeded" });
    if (done === 200) this.asyncStats.completed++;
  }

  private async retrying(path: string, body: unknown): Promise<number | null> {
    const end = Date.now() + 15_000;
    while (!this.stopped && Date.now() < end) {
      const r = await this.api(path, body);
      if (r && (r.status === 200 || r.status === 409 || r.status === 401 || r.status === 404)) {
        if (r.status !== 200) this.asyncStats.stale++;
        return r.status;
      }
      await Bun.sleep(250);
    }
    this.asyncStats.gaveUp++;
    return null;
  }

  stop(): void {
    this.stopped = true;
    for (const s of this.servers) s.stop(true);
  }
}
