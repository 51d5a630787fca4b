import type { Db } from "../store/db.ts";
import { acceptAsync } from "../store/async-queries.ts";
import type { ClaimedJob } from "../store/types.ts";
import type { Logger } from "../obs/log.ts";
import type { DeliveryContext, DeliveryResult } from "./deliver.ts";
import { makeLeaseToken } from "./lease-token.ts";

/**
 * The call that hands an async job to its target only has to be accepted, not worked:
 * it gets at most this long, however long the job's timeout (its execution ceiling) is.
 */
export const ASYNC_CALL_TIMEOUT_MS = 30_000;

/** The extra parts of an async job's call: its lease token and the call's time limit. */
export function asyncCallContext(job: ClaimedJob, gen: number): Pick<DeliveryContext, "leaseToken" | "callTimeoutMs"> {
  if (!job.async || !job.lease_key) return {};
  return { leaseToken: makeLeaseToken(job.lease_key, job.id, gen), callTimeoutMs: Math.min(job.timeout_ms, ASYNC_CALL_TIMEOUT_MS) };
}

/** Whether this answer hands the job over: an async job's target answered 2xx. */
export function isAcceptance(job: ClaimedJob, r: DeliveryResult): boolean {
  return job.async && r.outcome === "success";
}

/**
 * Records that the target accepted: the job stays running under the async lease, with no
 * worker holding it (the slot is free as soon as this returns). The target renews the
 * lease with heartbeats and ends the attempt with /complete; the reaper takes it back if
 * the heartbeats stop, and ends it at its execution ceiling.
 */
export async function recordAcceptance(
  db: Db,
  log: Logger,
  p: { owner: string; job: ClaimedJob; gen: number; attemptId: string; leaseMs: number; r: DeliveryResult },
): Promise<void> {
  const ok = await acceptAsync(db, { owner: p.owner, jobId: p.job.id, gen: p.gen, leaseMs: p.leaseMs, attemptId: p.attemptId, httpStatus: p.r.httpStatus });
  const fields = { job_id: p.job.id, http_status: p.r.httpStatus, lease_ms: p.leaseMs };
  // Not ours any more: the target may already have completed it (its callback can beat
  // this write), or the lease was lost while the call ran. Either way nothing to undo.
  if (ok) log.info(fields, "async job accepted by its target; waiting for heartbeats and completion");
  else log.info(fields, "async job accepted, but it had already moved on (completed by its target, or reclaimed)");
}
