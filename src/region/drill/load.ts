/**
 * The drill's clients: creates one-off jobs through the home region's API, paced over a
 * window, each retried (same idempotency key, same body) until some region that is home
 * answers 201 or 200. A job counts as acknowledged only then.
 */
export interface JobRecord {
  i: number;
  key: string;
  /** The due instant asked for (ms); fixed at the first attempt so retries are the same request. */
  runAt: number;
  firstAttemptAt: number;
  ackAt: number | null;
  /** 201 created, 200 idempotent replay. */
  ackStatus: number | null;
  ackRegion: string | null;
  attempts: number;
  lastError: string | null;
  /** A refusal that retrying cannot fix (400, 409 without fly-replay). */
  rejected: string | null;
}

export interface LoadOptions {
  jobs: number;
  /** Webhook target base URL; job i calls <targetUrl>/j/<i>. */
  targetUrl: string;
  /** Region → its API base URL. */
  apis: Map<string, string>;
  home: string;
  /** Job i is first tried at start + i × windowMs / jobs. */
  windowMs: number;
  /** Due times are spread over [minDueMs, maxDueMs] after the first attempt. */
  minDueMs: number;
  maxDueMs: number;
  requestTimeoutMs?: number;
  retryDelayMs?: number;
}

export interface ClusterView {
  region?: string;
  home_region?: string;
  role?: string;
  generation?: number;
  epoch?: number | string;
  leader?: unknown;
  lease_until?: string | null;
}

/** Spreads job i's due offset evenly over [min, max] (golden-ratio sequence: no clumps). */
export function dueOffsetMs(i: number, minMs: number, maxMs: number): number {
  const frac = (i * 0.6180339887498949) % 1;
  return Math.round(minMs + frac * (maxMs - minMs));
}

export async function getCluster(base: string, timeoutMs = 1000): Promise<ClusterView | null> {
  try {
    const res = await fetch(`${base}/v1/cluster`, { signal: AbortSignal.timeout(timeoutMs) });
    if (res.status !== 200) return null;
    return (await res.json()) as ClusterView;
  } catch {
    return null;
  }
}

function replayRegion(res: Response): string | null {
  const h = res.headers.get("fly-replay");
  return h ? (/region=([a-z0-9-]+)/.exec(h)?.[1] ?? null) : null;
}

const short = (err: unknown) => {
  const e = err as { code?: string; name?: string; message?: string };
  return e?.code ?? e?.name ?? e?.message ?? String(err);
};

export class Load {
  readonly jobs: JobRecord[] = [];
  home: string;
  requests = 0;
  /** Answers other than 200/201, by kind: "connection" (refused, reset, timeout), "409-replay", "503", … */
  readonly retries = new Map<string, number>();
  private stopped = false;
  private discovering: Promise<void> | undefined;
  private tasks: Promise<void>[] = [];
  startedAt = 0;

  constructor(private readonly o: LoadOptions) {
    this.home = o.home;
  }

  get acknowledged(): number {
    return this.jobs.filter((j) => j.ackAt !== null).length;
  }

  /** Resolves once every job has been tried and each is acknowledged, rejected, or the load stopped. */
  run(): Promise<void> {
    this.startedAt = Date.now();
    const pacer = (async () => {
      for (let i = 0; i < this.o.jobs && !this.stopped; i++) {
        const at = this.startedAt + (i * this.o.windowMs) / this.o.jobs;
        const wait = at - Date.now();
        if (wait > 0) await Bun.sleep(wait);
        if (this.stopped) break;
        this.tasks.push(this.create(i));
      }
    })();
    return pacer.then(() => Promise.all(this.tasks)).then(() => undefined);
  }

  stop(): void {
    this.stopped = true;
  }

  private count(kind: string): void {
    this.retries.set(kind, (this.retries.get(kind) ?? 0) + 1);
  }

  private async create(i: number): Promise<void> {
    const now = Date.now();
    const rec: JobRecord = {
      i,
      key: `drill-${i}`,
      runAt: now + dueOffsetMs(i, this.o.minDueMs, this.o.maxDueMs),
      firstAttemptAt: now,
      ackAt: null,
      ackStatus: null,
      ackRegion: null,
      attempts: 0,
      lastError: null,
      rejected: null,
    };
    this.jobs.push(rec);
    const body = JSON.stringify({ target: { url: `${this.o.targetUrl}/j/${i}` }, run_at: new Date(rec.runAt).toISOString(), idempotency_key: rec.key });
    const r = await this.post("/v1/jobs", body, rec);
    if (r && (r.status === 200 || r.status === 201)) {
      rec.ackAt = Date.now();
      rec.ackStatus = r.status;
      rec.ackRegion = r.region;
    }
  }

  /** Creates the every-second schedule; 201, or 409 "already exists" from a retried create. */
  async createSchedule(body: unknown): Promise<{ status: number; region: string } | null> {
    const rec = { attempts: 0, lastError: null as string | null, rejected: null as string | null };
    return this.post("/v1/schedules", JSON.stringify(body), rec, [201, 409]);
  }

  /**
   * POSTs to the home region until an answer in `done` (default 200/201) or a refusal that
   * retrying cannot fix; follows fly-replay, asks GET /v1/cluster after a failure.
   */
  private async post(
    path: string,
    body: string,
    rec: { attempts: number; lastError: string | null; rejected: string | null },
    done: number[] = [200, 201],
  ): Promise<{ status: number; region: string } | null> {
    let replays = 0;
    while (!this.stopped) {
      const region = this.home;
      const base = this.o.apis.get(region);
      let unreachable = false;
      rec.attempts++;
      this.requests++;
      if (base) {
        try {
          const res = await fetch(base + path, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
            signal: AbortSignal.timeout(this.o.requestTimeoutMs ?? 5000),
          });
          const text = await res.text();
          const replay = res.status === 409 ? replayRegion(res) : null;
          if (replay) {
            this.count("409-replay");
            rec.lastError = `409 fly-replay region=${replay} from ${region}`;
            if (replay !== region && this.o.apis.has(replay)) {
              this.home = replay;
              // Two regions pointing at each other mid-move: do not spin.
              if (++replays > 1) await Bun.sleep(this.o.retryDelayMs ?? 200);
              continue;
            }
          } else if (done.includes(res.status)) {
            return { status: res.status, region };
          } else if (res.status === 400 || res.status === 409 || res.status === 422) {
            rec.rejected = `${res.status} from ${region}: ${text.slice(0, 200)}`;
            rec.lastError = rec.rejected;
            return null;
          } else {
            this.count(String(res.status));
            rec.lastError = `${res.status} from ${region}: ${text.slice(0, 200)}`;
          }
        } catch (err) {
          this.count("connection");
          rec.lastError = `${short(err)} from ${region}`;
          unreachable = true;
        }
      }
      await this.discoverHome();
      // Nobody says where home is and this one is down: try the next region (a wrong guess
      // answers 409 with fly-replay, which brings us back).
      if (unreachable && this.home === region) this.home = this.nextRegion(region);
      await Bun.sleep(this.o.retryDelayMs ?? 200);
    }
    return null;
  }

  private nextRegion(region: string): string {
    const names = [...this.o.apis.keys()];
    return names[(names.indexOf(region) + 1) % names.length];
  }

  /**
   * Asks every region's GET /v1/cluster (one round at a time, shared by all the retrying
   * creates): the region answering role "home" with the highest generation wins; else the
   * home_region some region names.
   */
  discoverHome(): Promise<void> {
    this.discovering ??= (async () => {
      try {
        const views = await Promise.all([...this.o.apis].map(async ([region, base]) => ({ region, view: await getCluster(base) })));
        const homes = views.filter((v) => v.view?.role === "home").sort((x, y) => (y.view!.generation ?? 0) - (x.view!.generation ?? 0));
        if (homes[0]) {
          this.home = homes[0].region;
          return;
        }
        const named = views.map((v) => v.view?.home_region).find((h): h is string => !!h && this.o.apis.has(h));
        if (named) this.home = named;
      } finally {
        this.discovering = undefined;
      }
    })();
    return this.discovering;
  }
}
