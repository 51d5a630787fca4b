// Shared by the schedule generation / policy tests: a recording target that knows how many
// calls of each path are in flight, and small readers for schedules, jobs and metrics.
import { expect } from "bun:test";
import { ScheduleGenerator } from "../../src/dispatcher/schedule-generator.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import type { Runtime } from "../../src/runtime.ts";
import type { Db } from "../../src/store/db.ts";
import type { ScheduleFields } from "../../src/store/schedules.ts";
import { CronRule } from "../../src/time/cron-rule.ts";
import { api } from "../helpers/scheduler.ts";
import { takeShards } from "../helpers/shards.ts";
import { Target, type Received } from "../helpers/target.ts";

/** A loopback target: paths starting with /slow answer after slowMs, others at once. */
export class Recorder {
  readonly target: Target;
  /** When the answer to each call was sent. */
  readonly done = new Map<Received, number>();
  private inflight = new Map<string, number>();
  readonly maxInflight = new Map<string, number>();

  constructor(slowMs = 2500) {
    this.target = new Target(async (r) => {
      const cur = (this.inflight.get(r.path) ?? 0) + 1;
      this.inflight.set(r.path, cur);
      this.maxInflight.set(r.path, Math.max(cur, this.maxInflight.get(r.path) ?? 0));
      try {
        if (r.path.startsWith("/slow")) await Bun.sleep(slowMs);
        return new Response("ok");
      } finally {
        this.inflight.set(r.path, (this.inflight.get(r.path) ?? 1) - 1);
        this.done.set(r, Date.now());
      }
    });
  }

  get url(): string {
    return this.target.url;
  }

  calls(path: string): Received[] {
    return this.target.callsTo(path);
  }

  stop(): void {
    this.target.stop();
  }
}

export const nominalOf = (r: Received) => Date.parse(r.headers["scheduler-nominal-time"]);
export const isCatchup = (r: Received) => r.headers["scheduler-catchup"] === "true";
export const iso = (ms: number) => new Date(ms).toISOString();

/** Creates a schedule through the API; fails the test unless 201. */
export async function createSchedule(rt: Runtime, body: Record<string, unknown>) {
  const res = await api(rt, "POST", "/v1/schedules", body);
  if (res.status !== 201) throw new Error(`POST /v1/schedules answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function getSchedule(rt: Runtime, id: string) {
  const res = await api(rt, "GET", `/v1/schedules/${id}`);
  expect(res.status).toBe(200);
  return res.body;
}

/** Every job of a schedule through the API (one page of up to 1000). */
export async function apiJobs(rt: Runtime, scheduleId: string): Promise<any[]> {
  const res = await api(rt, "GET", `/v1/jobs?schedule_id=${encodeURIComponent(scheduleId)}&limit=1000`);
  expect(res.status).toBe(200);
  return res.body.items;
}

export interface JobLite {
  id: string;
  status: string;
  nominal: number;
  created: number;
  due: number | null;
  scheduled_for: number;
  catchup: boolean;
  calls: number;
  idempotency_key: string;
  dead_reason: string | null;
  epoch: number | null;
  queued_at: number | null;
}

const ms = (d: unknown): number | null => (d instanceof Date && Number.isFinite(d.getTime()) ? d.getTime() : null);

/** Every job of a schedule straight from the database, in nominal order. */
export async function dbJobs(db: Db, scheduleId: string): Promise<JobLite[]> {
  const rows = await db.query<Record<string, any>>(
    `SELECT id, status, nominal_time, created_at, due_at, scheduled_for, catchup, calls, idempotency_key, dead_reason, epoch, queued_at
     FROM jobs WHERE schedule_id = $1 ORDER BY nominal_time`,
    [scheduleId],
  );
  return rows.map((r) => ({
    id: r.id,
    status: r.status,
    nominal: ms(r.nominal_time)!,
    created: ms(r.created_at)!,
    due: ms(r.due_at),
    scheduled_for: ms(r.scheduled_for)!,
    catchup: r.catchup,
    calls: Number(r.calls),
    idempotency_key: r.idempotency_key,
    dead_reason: r.dead_reason,
    epoch: r.epoch === null ? null : Number(r.epoch),
    queued_at: ms(r.queued_at),
  }));
}

/** A counter's value from /metrics (0 when the series is absent). */
export async function metric(rt: Runtime, name: string, labels: string): Promise<number> {
  const res = await fetch(`${rt.url}/metrics`);
  const text = await res.text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.trim().split(/\s+/).at(-1)) : 0;
}

/** The rule's nominal instants in [from, to]. */
export function nominals(cron: string, from: number, to: number): number[] {
  return new CronRule({ cron, timezone: "UTC" }).next(100_000, from - 1, to);
}

/**
 * A schedule's stored fields for tests that insert one directly (no API): an hourly rule in
 * UTC calling a closed port, fire_all, overlap allow, not yet due; `over` changes any of it.
 */
export function scheduleFields(id: string, over: Partial<ScheduleFields> = {}): ScheduleFields {
  return {
    tenant: "default",
    id,
    cron: "0 * * * *",
    timezone: "UTC",
    dst_gap: null,
    dst_fold: null,
    target: { url: "http://127.0.0.1:9/x", method: "POST", headers: {}, body: null, json: false },
    priority: 0,
    max_attempts: 3,
    backoff_base_ms: 1000,
    backoff_max_ms: 60_000,
    timeout_ms: 5000,
    misfire: "fire_all",
    misfire_grace_ms: null,
    catchup_window_ms: 86_400_000,
    overlap: "allow",
    max_queued: 1,
    window_ms: 0,
    paused: false,
    start_at: null,
    end_at: null,
    next_fire_at: null,
    ...over,
  };
}

/** One generation pass of a fresh generator holding every shard, as a dispatcher's leader runs it. */
export async function generationPass(db: Db): Promise<number> {
  const generator = new ScheduleGenerator({ db, batch: 100, catchupPerSecond: 1000, log: silentLogger, metrics: new Metrics() });
  return generator.runOnce(await takeShards(db, "gen"));
}

/**
 * `n` hourly schedules `<prefix><from>` … due at the last full hour (on time: a grace of 2 h),
 * made in one statement, then the NOTIFY a created schedule sends, so a running dispatcher
 * looks at once (`notify: "none"`: as if that NOTIFY were lost).
 */
export async function dueHourlySchedules(db: Db, prefix: string, from: number, n: number, notify: "schedule" | "none" = "schedule"): Promise<void> {
  await db.query(
    `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms,
                            misfire, misfire_grace_ms, catchup_window_ms, overlap, next_fire_at)
     SELECT 'default', $1 || g, '0 * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}',
            3, 1000, 60000, 5000, 'skip', 7200000, 86400000, 'skip', date_trunc('hour', now())
     FROM generate_series($2::int, $3::int) g`,
    [prefix, from, from + n - 1],
  );
  if (notify === "schedule") await db.query("SELECT pg_notify('scheduler_due', 's' || (extract(epoch FROM date_trunc('hour', now())) * 1000)::bigint::text)");
}
