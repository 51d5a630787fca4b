import type { analyze } from "./analyze.ts";

/** The report's notes that say what the figures mean (why a job ran twice, why one was lost…). */
export function explainFindings(a: ReturnType<typeof analyze>, sync: boolean): string[] {
  const notes: string[] = [];
  if (a.redelivered_after_crash > 0) {
    notes.push(
      `${a.redelivered_after_crash} job(s) were accepted twice: once from the old generation before the kill and once from the new generation after it ` +
        `(${a.redelivered_keys.slice(0, 5).join(", ")}). Region a made the call but died before the outcome reached the surviving database, so region b ` +
        `ran it again: the documented at-least-once delivery. Both calls carry the same Idempotency-Key and webhook-id, so a target that deduplicates applies it once. Not counted as duplicates.`,
    );
  }
  if (a.lost > 0 && !sync) {
    notes.push(
      `${a.lost} acknowledged job(s) lost: without --sync the standby is asynchronous, so jobs region a acknowledged in the moments before the kill ` +
        `may never have reached it (RPO > 0). Run with --sync for synchronous replication (RPO 0).`,
    );
  }
  if (a.delivered_unacknowledged > 0) {
    notes.push(
      `${a.delivered_unacknowledged} job(s) were delivered although their create was never acknowledged (the answer was lost with region a, or the drill stopped retrying).`,
    );
  }
  if (a.calls_without_token > 0) notes.push(`${a.calls_without_token} call(s) came without a numeric Scheduler-Fencing-Token.`);
  if (a.catchup_runs > 1) {
    notes.push(
      `schedule drill-tick (misfire fire_once) ran ${a.catchup_runs} catch-up occurrences (Scheduler-Catchup: true) for one outage; fire_once allows one: ` +
        a.catchup_calls.map((c) => `${c.key} at kill + ${c.after_kill_ms} ms`).join(", ") +
        ` (all the schedule's calls around the outage: ticks_around_outage in the JSON report).`,
    );
  }
  if (a.ticks_after_takeover === 0) notes.push(`schedule drill-tick did not tick from region b after the takeover.`);
  if (a.outage_due_delivered < a.outage_due) notes.push(`${a.outage_due - a.outage_due_delivered} job(s) due during the outage were never delivered.`);
  return notes;
}
