import type { Queryable } from "../store/db.ts";
import { asyncPastDeadline, finishAsync, type AsyncFinish } from "../store/async-queries.ts";
import { transactionNow } from "../store/jobs.ts";
import type { ClaimedJob, JobRow } from "../store/types.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { formatDuration } from "../time/duration.ts";
import { decideNext } from "./decide.ts";
import type { DeliveryResult } from "./deliver.ts";

/** How an async attempt ends: the target's report, or its execution ceiling. */
export type AsyncReport = { kind: "succeeded" } | { kind: "failed"; error: string | null; retryAfterMs: number | null } | { kind: "timed_out" };

/**
 * What a report means for the job, through the same rules as a call's answer: a reported
 * failure is `transient` (a try used up, backoff, dead after max_attempts; retry_after, when
 * given, replaces the backoff delay, as a Retry-After would), a passed ceiling is `unknown`
 * (the work may have happened), a success ends it.
 */
export function decideAsync(
  job: ClaimedJob,
  report: AsyncReport,
  nowMs: number,
  random: () => number = Math.random,
): Omit<AsyncFinish, "jobId" | "gen" | "beforeDeadline"> {
  const at = new Date(nowMs);
  const error =
    report.kind === "failed"
      ? `the target reported failure${report.error ? `: ${report.error}` : ""}`
      : report.kind === "timed_out"
        ? `timed out: still running ${formatDuration(job.timeout_ms)} after the attempt started (timeout is the execution ceiling of an async job)`
        : null;
  const r: DeliveryResult = {
    outcome: report.kind === "succeeded" ? "success" : report.kind === "failed" ? "transient" : "unknown",
    httpStatus: null,
    error,
    possiblyDelivered: report.kind === "timed_out",
    retryAfterMs: null,
    refused: false,
    startedAt: at,
    finishedAt: at,
  };
  let next = decideNext(job, r, nowMs, random);
  if (report.kind === "failed" && report.retryAfterMs !== null && next.status === "scheduled") {
    const expiresAt = job.expires_at?.getTime() ?? null;
    next =
      expiresAt !== null && nowMs + report.retryAfterMs >= expiresAt
        ? { ...next, status: "expired", delayMs: null, error: `${error}; retry_after would fall after expires_at` }
        : { ...next, delayMs: report.retryAfterMs };
  }
  return {
    nextStatus: next.status,
    delayMs: next.delayMs,
    countsTry: next.countsTry,
    lastError: next.error,
    deadReason: next.deadReason,
    attemptOutcome: report.kind === "succeeded" ? "success" : report.kind === "failed" ? "failed" : "unknown",
    attemptError: error,
    possiblyDelivered: report.kind === "timed_out",
  };
}

/** Ends the async attempt of generation `gen`; undefined when it had already ended. */
export async function endAsyncAttempt(db: Queryable, job: ClaimedJob, gen: number, report: AsyncReport, metrics: Metrics): Promise<JobRow | undefined> {
  // expires_at is on the database's clock: the retry-or-expire decision reads that clock
  // (a report is rare enough for the extra round trip).
  const now = (await transactionNow(db)).getTime();
  const row = await finishAsync(db, { jobId: job.id, gen, beforeDeadline: report.kind !== "timed_out", ...decideAsync(job, report, now) });
  if (row?.status === "dead") metrics.dlqIngress.inc();
  if (row?.status === "succeeded") metrics.endToEnd.observe(Math.max(0, (now - job.scheduled_for.getTime()) / 1000));
  return row;
}

/** The reaper's pass over async attempts past their execution ceiling (heartbeating or not). */
export async function endTimedOutAsync(db: Queryable, limit: number, log: Logger, metrics: Metrics): Promise<number> {
  let ended = 0;
  for (const job of await asyncPastDeadline(db, limit)) {
    const row = await endAsyncAttempt(db, job, job.lease_generation, { kind: "timed_out" }, metrics);
    if (!row) continue; // reported or reaped meanwhile
    ended++;
    metrics.asyncTimeouts.inc();
    log.warn({ job_id: job.id, status: row.status, timeout_ms: job.timeout_ms }, "async job ran past its timeout; attempt ended");
  }
  return ended;
}
