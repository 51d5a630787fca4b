import { isQuarantined } from "../store/dlq.ts";
import type { JobRow } from "../store/types.ts";
import { jobView } from "./job-view.ts";

/** A dead-letter entry: the job object of GET /v1/jobs plus how and when it died. */
export function deadView(j: JobRow, quarantineAfter: number) {
  const job = jobView(j);
  return {
    ...job,
    reason: j.dead_reason,
    dead_at: job.finished_at,
    replays: j.replays,
    quarantined: isQuarantined(j, quarantineAfter),
    // How it died ("permanent:400", "max_attempts:unknown") and how many deaths in a row did so.
    failure_signature: j.dead_signature,
    same_failure_count: j.dead_streak,
    schema_version: j.schema_version,
  };
}
