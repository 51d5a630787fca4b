import type { Db } from "../store/db.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { ABORT_LEASE, ABORT_STOP } from "./abort-reasons.ts";
import { asyncCallContext, isAcceptance, recordAcceptance } from "./async-accept.ts";
import type { CompletionBatcher } from "./completion-batcher.ts";
import { decideNext } from "./decide.ts";
import { type DeliveryContext, deliver, type DeliveryResult } from "./deliver.ts";
import type { HostLimiter } from "./host-limiter.ts";
import type { SigningKeyring } from "./signing-keyring.ts";
import { hostPaused, waitOutPause } from "./pause-wait.ts";
import { type PayloadCache, withBody } from "./payload-cache.ts";
import type { InFlight } from "./in-flight.ts";
import type { DbClock } from "../time/db-clock.ts";

export interface AttemptDeps {
  db: Db;
  owner: string;
  log: Logger;
  metrics: Metrics;
  limiter: HostLimiter<InFlight>;
  payloads: PayloadCache;
  completions: CompletionBatcher;
  /** Signing keys per tenant and schedule, in memory (no database read per call). */
  keyring?: SigningKeyring;
  allowPrivateTargets: boolean;
  asyncLeaseMs: number;
  /** The database's clock (as last measured): expires_at and throttle limits are on it. */
  clock: DbClock;
}

/**
 * One attempt, after its pre-call check: the call (outside any transaction), its effect on
 * the host's pacing, the decision (succeeded, retry, dead) and its generation-checked record.
 */
export async function callAttempt(d: AttemptDeps, f: InFlight, attemptId: string, number: number, catchup: boolean, called?: () => void): Promise<void> {
  const { job } = f;
  const startMs = d.clock.now();
  if (job.queued_at) d.metrics.queueWait.observe(Math.max(0, (startMs - job.queued_at.getTime()) / 1000));
  d.metrics.startLag.observe(Math.max(0, (startMs - job.due_at.getTime()) / 1000));
  // The common call has its body in the row and its host not paused: neither is awaited then
  // (each await of an async helper is a promise and a generator a call; bench/README part 30).
  const loaded = job.target.body_ref ? await withBody(job, d.payloads) : undefined;
  const notSent = loaded && "result" in loaded ? loaded.result : hostPaused(d.limiter, job) ? await waitOutPause(d.limiter, job, f.abort.signal) : undefined;
  let r: DeliveryResult;
  if (notSent) r = notSent;
  else {
    const ctx: DeliveryContext = {
      attemptId,
      attemptNumber: number,
      catchup,
      signingKeys: d.keyring?.keysFor(job.tenant, job.schedule_id),
      allowPrivateTargets: d.allowPrivateTargets,
      abort: f.abort,
    };
    if (job.async) Object.assign(ctx, asyncCallContext(job, f.gen));
    r = await deliver(loaded && "job" in loaded ? loaded.job : job, ctx);
  }
  // The target is done with us: its call slot can serve the next job while this outcome is written.
  called?.();
  d.metrics.deliveries.tally(r.outcome);
  // The host's answer paces further calls to it (429/503 slow it, Retry-After pauses it).
  if (
    !notSent &&
    d.limiter.finish(job.id, {
      outcome: r.outcome,
      retryAfterMs: r.retryAfterMs,
      startedAt: r.startedAt.getTime(),
      durationMs: r.finishedAt.getTime() - r.startedAt.getTime(),
    })
  ) {
    d.metrics.throttledHosts.set(d.limiter.throttledHosts());
  }
  d.metrics.executionDuration.observe((r.finishedAt.getTime() - r.startedAt.getTime()) / 1000);
  if (isAcceptance(job, r)) {
    // The target took the job: from here it is the target's (heartbeats, completion), and
    // this slot is free once the acceptance is written.
    return recordAcceptance(d.db, attemptLog(d, f, attemptId, number), { owner: d.owner, job, gen: f.gen, attemptId, leaseMs: d.asyncLeaseMs, r });
  }
  // Retry and expiry decisions compare with expires_at, an instant on the database's clock.
  const now = d.clock.now();
  // The job as of this call (a claim that was the check returned it so already: no copy).
  let next = decideNext(job.calls === number ? job : { ...job, calls: number }, r, now);
  const why = f.abort.signal.aborted ? f.abort.signal.reason : undefined;
  if (r.outcome !== "success" && (why === ABORT_STOP || why === ABORT_LEASE)) {
    // Our stop, not the target's failure: retry at once elsewhere, without using up a try.
    next = { status: "scheduled", delayMs: 0, countsTry: false, throttleUntil: null, deadReason: null, error: r.error };
  }
  const accepted = await d.completions.push({
    job_id: job.id,
    gen: f.gen,
    attempt_id: attemptId,
    outcome: r.outcome,
    http_status: r.httpStatus,
    error: r.error,
    possibly_delivered: r.possiblyDelivered,
    started_at: r.startedAt,
    finished_at: r.finishedAt,
    next_status: next.status,
    next_delay_ms: next.delayMs,
    last_error: next.error,
    counts_try: next.countsTry,
    throttle_until: next.throttleUntil,
    dead_reason: next.deadReason,
  });
  if (!accepted) {
    d.metrics.duplicateAttempts.inc();
    attemptLog(d, f, attemptId, number).warn(
      logFields(r, next),
      "late completion: the lease moved on while the call ran; kept as the lost attempt's late outcome",
    );
    return;
  }
  if (next.status === "succeeded") d.metrics.endToEnd.observe(Math.max(0, (now - job.scheduled_for.getTime()) / 1000));
  if (next.status === "dead") d.metrics.dlqIngress.inc();
  if (next.status === "scheduled" && r.outcome !== "success") d.metrics.retries.tally(r.outcome);
  if (r.outcome === "success") {
    if (d.log.isLevelEnabled("info")) attemptLog(d, f, attemptId, number).info(logFields(r, next), "delivered");
  } else attemptLog(d, f, attemptId, number).warn({ ...logFields(r, next), error: next.error, retry_in_ms: next.delayMs }, "delivery failed");
}

/**
 * The attempt's logger, made only for a line that is written: a child logger serializes its
 * bindings at once (~3 % of the worker's CPU in a burst where nothing was logged). It carries
 * the fencing token the call carried: which leader and region generation sent it.
 */
function attemptLog(d: AttemptDeps, f: InFlight, attemptId: string, number: number): Logger {
  return d.log.child({ job_id: f.job.id, attempt: number, attempt_id: attemptId, epoch: f.job.epoch });
}

function logFields(r: DeliveryResult, next: { status: string }) {
  return {
    outcome: r.outcome,
    http_status: r.httpStatus,
    ms: r.finishedAt.getTime() - r.startedAt.getTime(),
    next: next.status,
    ...(r.refusedAddress ? { refused_address: r.refusedAddress } : {}),
  };
}
