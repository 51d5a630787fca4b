import { isQuarantined, JOB_SCHEMA_VERSION } from "../store/dlq.ts";
import type { JobRow } from "../store/types.ts";
import { targetRefusal } from "./target-check.ts";

/**
 * Why a dead job may not be replayed now, checked right before a replay (and in a dry run).
 *   409 not_dead                    it is not in the dead-letter queue (any more)
 *   422 schema_version_unsupported  stored in a job shape this version does not understand
 *   422 payload_missing             its target (URL, method, headers, body) is not all there
 *   422 expired                     its expires_at has passed: it could never start
 *   422 target_refused              the target guard refuses its address now
 *                                   (SCHEDULER_ALLOW_PRIVATE_TARGETS applies)
 *   409 quarantined                 it died the same way after SCHEDULER_DLQ_QUARANTINE_AFTER
 *                                   replays; only "force": true replays it
 * 422: the job itself can no longer run as stored, and force does not change that.
 */
export interface Refusal {
  status: 409 | 422;
  code: "not_dead" | "schema_version_unsupported" | "payload_missing" | "expired" | "target_refused" | "quarantined";
  message: string;
}

export interface ReplayCheckOptions {
  allowPrivateTargets: boolean;
  quarantineAfter: number;
  force: boolean;
  nowMs: number;
  /** Target verdicts per host within one request. */
  seen: Map<string, Promise<string | null>>;
}

function payloadProblem(j: JobRow): string | null {
  const t = j.target as Partial<JobRow["target"]> | null;
  if (!t || typeof t !== "object") return "the job has no stored target";
  if (typeof t.url !== "string" || t.url === "") return "the stored target has no url";
  if (typeof t.method !== "string" || t.method === "") return "the stored target has no method";
  if (t.headers !== undefined && (t.headers === null || typeof t.headers !== "object")) return "the stored target headers are not an object";
  if (t.body !== null && t.body !== undefined && typeof t.body !== "string") return "the stored body is not text";
  if (t.json && typeof t.body === "string") {
    try {
      JSON.parse(t.body);
    } catch {
      return "the stored JSON body does not parse";
    }
  }
  return null;
}

export async function replayRefusal(j: JobRow, o: ReplayCheckOptions): Promise<Refusal | null> {
  if (j.status !== "dead") return { status: 409, code: "not_dead", message: `job ${j.id} is ${j.status}, not dead: only dead jobs can be replayed` };
  if (j.schema_version !== JOB_SCHEMA_VERSION) {
    return {
      status: 422,
      code: "schema_version_unsupported",
      message: `job ${j.id} is stored in job schema version ${j.schema_version}; this scheduler understands version ${JOB_SCHEMA_VERSION} only`,
    };
  }
  const payload = payloadProblem(j);
  if (payload) return { status: 422, code: "payload_missing", message: `job ${j.id} cannot be replayed: ${payload}` };
  if (j.expires_at && j.expires_at.getTime() <= o.nowMs) {
    return { status: 422, code: "expired", message: `job ${j.id} expired at ${j.expires_at.toISOString()}; a replay could never start` };
  }
  const refused = await targetRefusal(j.target.url, o.seen, o.allowPrivateTargets);
  if (refused) return { status: 422, code: "target_refused", message: `job ${j.id} cannot be replayed: ${refused}` };
  if (!o.force && isQuarantined(j, o.quarantineAfter)) {
    return {
      status: 409,
      code: "quarantined",
      message: `job ${j.id} is quarantined: it died the same way (${j.dead_signature}) after ${j.dead_streak - 1} replays; send "force": true to replay it anyway`,
    };
  }
  return null;
}
