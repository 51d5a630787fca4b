import type { Config } from "../config.ts";
import type { Metrics } from "../obs/metrics.ts";
import type { Db } from "../store/db.ts";
import { getJob } from "../store/jobs.ts";
import { type DeadCursor, type DeadFilter, isQuarantined, listDead, peekReplayPace, replayDead } from "../store/dlq.ts";
import type { JobRow } from "../store/types.ts";
import { ApiError, conflict, notFound } from "./errors.ts";
import { replayRefusal, type Refusal } from "./replay-check.ts";
import { transactionNow } from "../store/jobs.ts";

/** Most dead jobs one bulk replay call looks at; the answer's next_cursor goes on. */
export const MAX_BULK = 1000;

export interface ReplayDeps {
  db: Db;
  config: Pick<Config, "allowPrivateTargets" | "dlqQuarantineAfter" | "catchupPerSecond">;
  metrics: Metrics;
}

export interface Who {
  actor: string;
  reason: string | null;
}

/** What the audit row says about the job's death that the replay ends. */
function previousDeath(j: JobRow, quarantineAfter: number) {
  return {
    dead_reason: j.dead_reason,
    failure_signature: j.dead_signature,
    same_failure_count: j.dead_streak,
    dead_at: j.finished_at?.toISOString() ?? null,
    quarantined: isQuarantined(j, quarantineAfter),
  };
}

/** POST /v1/dlq/:id/replay: the job back to scheduled, due now, same id. */
export async function replayOne(d: ReplayDeps, id: string, tenant: string | null, force: boolean, by: Who): Promise<JobRow> {
  const job = await getJob(d.db, id, tenant);
  if (!job) throw notFound(`job ${id}`);
  const refusal = await replayRefusal(job, {
    allowPrivateTargets: d.config.allowPrivateTargets,
    quarantineAfter: d.config.dlqQuarantineAfter,
    force,
    nowMs: (await transactionNow(d.db)).getTime(),
    seen: new Map(),
  });
  if (refusal) throw new ApiError(refusal.status, refusal.code, refusal.message);
  const [row] = await replayDead(d.db, {
    items: [{ id, version: job.version, offsetMs: 0 }],
    paceStepMs: null,
    tenant,
    audit: (r) => ({
      actor: by.actor,
      tenant: r.tenant,
      action: "dlq.replayed",
      objectId: r.id,
      reason: by.reason,
      details: { mode: "single", force, replays: r.replays, due_at: r.due_at.toISOString(), previous: previousDeath(job, d.config.dlqQuarantineAfter) },
    }),
  });
  if (!row) {
    const now = await getJob(d.db, id, tenant);
    if (now && now.status !== "dead") throw conflict("not_dead", `job ${id} is ${now.status}, not dead: only dead jobs can be replayed`);
    throw conflict("version_mismatch", `job ${id} changed while it was being replayed; try again`);
  }
  d.metrics.dlqReplays.inc({ mode: "single" });
  return row;
}

export interface BulkRequest {
  filter: DeadFilter;
  /** The filter as given, for the audit row. */
  filterInput: unknown;
  after: DeadCursor | null;
  limit: number;
  ratePerSec: number | undefined;
  dryRun: boolean;
  force: boolean;
  /** The token's own tenant (null: every tenant), a second lock on the update. */
  tenant: string | null;
  by: Who;
}

export interface Skipped {
  id: string;
  code: Refusal["code"] | "changed";
  message: string;
}

export interface BulkResult {
  dry_run: boolean;
  count: number;
  job_ids: string[];
  skipped: Skipped[];
  /** Calls are spread this far apart: the rate asked for, capped by SCHEDULER_CATCHUP_RATE. */
  rate_per_sec: number;
  first_due_at: string | null;
  last_due_at: string | null;
  /** More dead jobs match than this call looked at: call again with this cursor. */
  next_cursor: DeadCursor | null;
  truncated: boolean;
}

/**
 * POST /v1/dlq/replay: the dead jobs matching the filter (at most `limit` looked at, oldest
 * death first), checked one by one; the replayable ones are due rate_per_sec apart from the
 * durable replay pace on, and run as catch-up class. A dry run reports the same and changes
 * nothing.
 */
export async function replayBulk(d: ReplayDeps, r: BulkRequest): Promise<BulkResult> {
  const q = d.config.dlqQuarantineAfter;
  const rows = await listDead(d.db, r.filter, q, r.after, r.limit + 1);
  const page = rows.slice(0, r.limit);
  const last = page[page.length - 1];
  const next = rows.length > r.limit && last ? { deadKey: last.dead_key, id: last.id } : null;
  const opts = {
    allowPrivateTargets: d.config.allowPrivateTargets,
    quarantineAfter: q,
    force: r.force,
    nowMs: (await transactionNow(d.db)).getTime(),
    seen: new Map<string, Promise<string | null>>(),
  };
  const skipped: Skipped[] = [];
  const ok: JobRow[] = [];
  for (const job of page) {
    const refusal = await replayRefusal(job, opts);
    if (refusal) skipped.push({ id: job.id, code: refusal.code, message: refusal.message });
    else ok.push(job);
  }
  const rate = Math.min(r.ratePerSec ?? d.config.catchupPerSecond, d.config.catchupPerSecond);
  const stepMs = 1000 / rate;
  const items = ok.map((j, i) => ({ id: j.id, version: j.version, offsetMs: i * stepMs }));
  const result = (ids: string[], first: Date | null, lastDue: Date | null): BulkResult => ({
    dry_run: r.dryRun,
    count: ids.length,
    job_ids: ids,
    skipped,
    rate_per_sec: rate,
    first_due_at: first?.toISOString() ?? null,
    last_due_at: lastDue?.toISOString() ?? null,
    next_cursor: next,
    truncated: next !== null,
  });
  if (r.dryRun) {
    if (items.length === 0) return result([], null, null);
    const start = (await peekReplayPace(d.db)).getTime();
    return result(
      items.map((i) => i.id),
      new Date(start),
      new Date(start + items[items.length - 1].offsetMs),
    );
  }
  const byId = new Map(ok.map((j) => [j.id, j]));
  const replayed = await replayDead(d.db, {
    items,
    paceStepMs: stepMs,
    tenant: r.tenant,
    audit: (row) => ({
      actor: r.by.actor,
      tenant: row.tenant,
      action: "dlq.replayed",
      objectId: row.id,
      reason: r.by.reason,
      details: { mode: "bulk", force: r.force, replays: row.replays, due_at: row.due_at.toISOString(), previous: previousDeath(byId.get(row.id)!, q) },
    }),
    summary: (done) => ({
      actor: r.by.actor,
      tenant: r.tenant,
      action: "dlq.bulk_replayed",
      objectId: null,
      reason: r.by.reason,
      details: {
        filter: r.filterInput,
        count: done.length,
        skipped: skipped.length + items.length - done.length,
        rate_per_sec: rate,
        force: r.force,
        truncated: next !== null,
      },
    }),
  });
  const done = new Set(replayed.map((j) => j.id));
  for (const i of items) {
    if (!done.has(i.id))
      skipped.push({ id: i.id, code: "changed", message: `job ${i.id} changed while it was being replayed (no longer dead, or a newer version); left alone` });
  }
  replayed.sort((a, b) => a.due_at.getTime() - b.due_at.getTime());
  if (replayed.length > 0) d.metrics.dlqReplays.inc({ mode: "bulk" }, replayed.length);
  return result(
    replayed.map((j) => j.id),
    replayed[0]?.due_at ?? null,
    replayed[replayed.length - 1]?.due_at ?? null,
  );
}
