/**
 * Steady mixed load: schedules created at the start of a round (per-second and per-minute,
 * each overlap and misfire policy, an async one, a throttled one) and one-off jobs created
 * through the API at a steady rate for the load window (fast, slow, async, throttled with
 * host_limits, some answered 429 once; due now or up to seconds later, by `delay` or
 * `run_at`). Creations are retried with the same idempotency key until acknowledged.
 */
import type { ApiClient } from "./client.ts";
import type { Prng } from "./prng.ts";

export interface ScheduleSpec {
  id: string;
  cron: string;
  /** The rule's period: "allow" schedules must have one occurrence every stepMs. */
  stepMs: number;
  overlap: "allow" | "skip" | "queue";
  misfire: "skip" | "fire_once" | "fire_all";
  graceMs: number;
  body: Record<string, unknown>;
}

export interface OneOff {
  key: string;
  kind: "fast" | "slow" | "long" | "retry" | "async" | "throttled";
  path: string;
  /** The due instant asked for: a delay (counted from the database's now() at the insert) or an absolute run_at. */
  delayMs: number | null;
  runAt: number | null;
  id: string | null;
  ackAt: number | null;
  tries: number;
  rejected: string | null;
}

const RETRY = { max_attempts: 8, base: "250ms", max: "2s" };

export function scheduleSpecs(targetUrl: string, throttledUrl: string): ScheduleSpec[] {
  const s = (
    id: string,
    cron: string,
    stepMs: number,
    overlap: ScheduleSpec["overlap"],
    misfire: ScheduleSpec["misfire"],
    graceMs: number,
    path: string,
    extra: Record<string, unknown> = {},
    base = targetUrl,
  ): ScheduleSpec => ({
    id,
    cron,
    stepMs,
    overlap,
    misfire,
    graceMs,
    body: {
      id,
      cron,
      timezone: "UTC",
      overlap,
      misfire,
      misfire_grace: `${graceMs}ms`,
      retry: RETRY,
      timeout: "10s",
      target: { url: `${base}${path}` },
      ...extra,
    },
  });
  // A grace of 30 s is longer than any outage the faults cause, so the policies of these
  // schedules never ask for a miss; sec2-queue-slow's 3 s grace is shorter than the time its
  // held occurrences wait for the one before (waiting for the previous is not a miss).
  return [
    s("sec-allow-once", "* * * * * *", 1000, "allow", "fire_once", 30_000, "/s/sec-allow-once"),
    s("sec-allow-all", "* * * * * *", 1000, "allow", "fire_all", 30_000, "/s/sec-allow-all"),
    s("sec-skip-slow", "* * * * * *", 1000, "skip", "skip", 30_000, "/slow/1500/s/sec-skip-slow"),
    s("sec2-queue-slow", "*/2 * * * * *", 2000, "queue", "skip", 3000, "/slow/5000/s/sec2-queue-slow", { max_queued: 1 }),
    s("sec3-async", "*/3 * * * * *", 3000, "skip", "fire_once", 30_000, "/async/s/sec3-async", { async: true, timeout: "30s" }),
    s("sec2-throttled", "*/2 * * * * *", 2000, "allow", "fire_all", 30_000, "/s/sec2-throttled", { host_limits: { rate: 3, concurrency: 2 } }, throttledUrl),
    // A short grace: the misfire expiry and the generator's coalescing meet on the same
    // occurrences whenever generation is late (hole 1's deadlock needs both on one row).
    s("sec-allow-once-g2", "* * * * * *", 1000, "allow", "fire_once", 2000, "/s/sec-allow-once-g2"),
    // More per-second "allow" schedules: both workers complete occurrences of the same
    // schedules in the same batches, in whatever order (hole 8's lock-order deadlock).
    s("sec-allow-x1", "* * * * * *", 1000, "allow", "fire_all", 30_000, "/s/sec-allow-x1"),
    s("sec-allow-x2", "* * * * * *", 1000, "allow", "fire_all", 30_000, "/s/sec-allow-x2"),
    s("sec-allow-x3", "* * * * * *", 1000, "allow", "fire_all", 30_000, "/s/sec-allow-x3"),
    s("min-once-skip", "* * * * *", 60_000, "skip", "fire_once", 30_000, "/s/min-once-skip"),
    s("min-all-allow", "* * * * *", 60_000, "allow", "fire_all", 30_000, "/s/min-all-allow"),
    s("min-skip-queue", "* * * * *", 60_000, "queue", "skip", 30_000, "/slow/1000/s/min-skip-queue"),
  ];
}

export class Load {
  readonly jobs: OneOff[] = [];
  readonly schedules: ScheduleSpec[];
  private stopped = false;
  private tasks: Promise<void>[] = [];

  constructor(private readonly o: { api: ApiClient; prng: Prng; targetUrl: string; throttledUrl: string; perSecond: number; label: string }) {
    this.schedules = scheduleSpecs(o.targetUrl, o.throttledUrl);
  }

  /** Creates the schedules (before any fault: a failure here is a setup error). */
  async createSchedules(): Promise<void> {
    for (const s of this.schedules) {
      const end = Date.now() + 30_000;
      for (;;) {
        const r = await this.o.api.request("POST", "/v1/schedules", s.body);
        if (r?.status === 201) break;
        if (r && r.status >= 400 && r.status < 500) throw new Error(`creating schedule ${s.id}: ${r.status} ${JSON.stringify(r.body)}`);
        if (Date.now() > end) throw new Error(`creating schedule ${s.id}: no answer for 30 s (last: ${r ? r.status : "no connection"})`);
        await Bun.sleep(300);
      }
    }
  }

  /** One-off jobs at perSecond until stop(). */
  run(): void {
    const p = this.o.prng;
    const t0 = Date.now();
    const pacer = (async () => {
      for (let i = 0; !this.stopped; i++) {
        const wait = t0 + (i * 1000) / this.o.perSecond - Date.now();
        if (wait > 0) await Bun.sleep(wait);
        if (this.stopped) break;
        const r = p.next();
        const kind: OneOff["kind"] = r < 0.3 ? "fast" : r < 0.42 ? "slow" : r < 0.52 ? "long" : r < 0.67 ? "retry" : r < 0.82 ? "async" : "throttled";
        const key = `${this.o.label}-${i}`;
        let path = `/j/${key}`;
        if (kind === "slow") path = `/slow/${p.int(500, 3000)}${path}`;
        // Calls longer than the lease: they are in flight when a worker's renewals fail.
        if (kind === "long") path = `/slow/${p.int(3000, 5000)}${path}`;
        // A retry chain of 2–5 attempts over ~0.5–4 s (RETRY's backoff), across faults.
        if (kind === "retry") path = `/fail/${p.int(1, 4)}${path}`;
        if (kind === "async") path = `/async${path}`;
        if (kind === "throttled" && p.next() < 0.25) path = `/t429${path}`;
        const offset = p.next() < 0.3 ? 0 : p.int(0, 8000);
        const byRunAt = p.next() < 0.3;
        const job: OneOff = {
          key,
          kind,
          path,
          delayMs: byRunAt ? null : offset,
          runAt: byRunAt ? Date.now() + offset : null,
          id: null,
          ackAt: null,
          tries: 0,
          rejected: null,
        };
        this.jobs.push(job);
        this.tasks.push(this.create(job));
      }
    })();
    this.tasks.push(pacer);
  }

  private body(j: OneOff): Record<string, unknown> {
    const base = j.kind === "throttled" ? this.o.throttledUrl : this.o.targetUrl;
    return {
      target: { url: base + j.path, body: { key: j.key } },
      idempotency_key: j.key,
      retry: RETRY,
      timeout: j.kind === "async" ? "30s" : "8s",
      ...(j.kind === "async" ? { async: true } : {}),
      ...(j.kind === "throttled" ? { host_limits: { rate: 3, concurrency: 2 } } : {}),
      ...(j.runAt !== null ? { run_at: new Date(j.runAt).toISOString() } : { delay: `${j.delayMs}ms` }),
    };
  }

  /** Retried with the same key and body (so the same request) until acknowledged, or 20 s after the load stops. */
  private async create(j: OneOff): Promise<void> {
    const body = this.body(j);
    let giveUpAt = Infinity;
    for (;;) {
      j.tries++;
      const r = await this.o.api.request("POST", "/v1/jobs", body);
      if (r && (r.status === 201 || r.status === 200)) {
        j.id = r.body.id;
        j.ackAt = Date.now();
        return;
      }
      if (r && r.status >= 400 && r.status < 500 && r.status !== 409 && r.status !== 429) {
        j.rejected = `${r.status} ${JSON.stringify(r.body).slice(0, 200)}`;
        return;
      }
      if (this.stopped && giveUpAt === Infinity) giveUpAt = Date.now() + 20_000;
      if (Date.now() > giveUpAt) return;
      await Bun.sleep(300);
    }
  }

  stop(): void {
    this.stopped = true;
  }

  /** Waits for the creations still being retried (bounded by their own give-up time). */
  async drain(): Promise<void> {
    await Promise.all(this.tasks);
  }
}
