import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";
import { JOB_STATUSES } from "./types.ts";

/** Upper bounds (seconds) of the start-lag histogram buckets in stats; the last is open. */
export const LAG_BUCKETS_S = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** Recent attempts read for throughput and lag: a bounded sample, the newest. */
const RECENT_MAX = 20_000;

export interface Stats {
  jobs: Record<string, number>;
  due_backlog: number;
  overdue: number;
  oldest_due_age_seconds: number;
  queue_depth: number;
  dlq: { jobs: number; oldest_age_seconds: number };
  recent: {
    window_seconds: number;
    /** Finished attempts in the window by outcome (success, transient, throttled, …). */
    by_outcome: Record<string, number>;
    /** Due instant → first call start, in seconds (null: no first calls in the window). */
    start_lag: { p50: number | null; p90: number | null; p99: number | null; max: number | null; count: number };
    execution: { p50: number | null; p99: number | null };
    lag_histogram: { le: number | null; count: number }[];
  };
}

const num = (x: unknown): number | null => (x === null || x === undefined ? null : Number(x));

/** The health facts of one tenant (or all, with null), read in a few bounded statements. */
export async function readStats(db: Queryable, p: { tenant: string | null; overdueMs: number; windowS: number }): Promise<Stats> {
  const [statusRows, backlogRows, recentRows, bucketRows] = await Promise.all([
    db.query<{ status: string; n: string }>(sql("StatsJobsByStatus"), [p.tenant]),
    db.query<{ due: string; overdue: string; oldest_due_age_s: string | null; dead: string; oldest_dead_age_s: string | null }>(sql("StatsBacklog"), [
      p.tenant,
      p.overdueMs,
    ]),
    db.query<Record<string, unknown> & { outcome: string | null; is_total: boolean; n: string }>(sql("StatsRecentAttempts"), [p.tenant, p.windowS, RECENT_MAX]),
    db.query<{ bucket: number; n: string }>(sql("StatsLagBuckets"), [p.tenant, p.windowS, RECENT_MAX, LAG_BUCKETS_S]),
  ]);
  const jobs: Record<string, number> = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0]));
  for (const r of statusRows) jobs[r.status] = Number(r.n);
  const b = backlogRows[0];
  const byOutcome: Record<string, number> = {};
  let total: (typeof recentRows)[number] | undefined;
  for (const r of recentRows) {
    if (r.is_total)
      total = r; // the ROLLUP row: every outcome together
    else byOutcome[r.outcome ?? "unknown"] = Number(r.n);
  }
  // width_bucket: bucket 0 is below the first bound, bucket i is [bound i, bound i+1); so
  // entry i counts lags below LAG_BUCKETS_S[i] (and not below the one before), the last
  // (le: null) everything from the last bound up.
  const counts = new Map(bucketRows.map((r) => [Number(r.bucket), Number(r.n)]));
  const histogram = [...LAG_BUCKETS_S.map((le) => le as number | null), null].map((le, i) => ({ le, count: counts.get(i) ?? 0 }));
  return {
    jobs,
    due_backlog: Number(b?.due ?? 0),
    overdue: Number(b?.overdue ?? 0),
    oldest_due_age_seconds: Math.max(0, num(b?.oldest_due_age_s) ?? 0),
    queue_depth: jobs.queued ?? 0,
    dlq: { jobs: Number(b?.dead ?? 0), oldest_age_seconds: Math.max(0, num(b?.oldest_dead_age_s) ?? 0) },
    recent: {
      window_seconds: p.windowS,
      by_outcome: byOutcome,
      start_lag: { p50: num(total?.lag_p50), p90: num(total?.lag_p90), p99: num(total?.lag_p99), max: num(total?.lag_max), count: Number(total?.firsts ?? 0) },
      execution: { p50: num(total?.exec_p50), p99: num(total?.exec_p99) },
      lag_histogram: histogram,
    },
  };
}
