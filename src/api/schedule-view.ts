import type { ScheduleRow } from "../store/schedules.ts";
import type { CronRule } from "../time/cron-rule.ts";
import { formatDuration } from "../time/duration.ts";
import { hostLimitsView, targetView } from "./job-view.ts";

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const dur = (ms: number) => formatDuration(ms);

/** The schedule object: what was asked, the effective DST policy and the generation state. */
export function scheduleView(s: ScheduleRow, rule: CronRule | null, storedBody?: string) {
  const next = nextFire(s);
  return {
    id: s.id,
    tenant: s.tenant,
    cron: s.cron,
    timezone: s.timezone,
    dst: rule ? { gap: rule.gap, fold: rule.fold } : { gap: s.dst_gap, fold: s.dst_fold },
    target: targetView(s.target, storedBody),
    retry: { max_attempts: s.max_attempts, base: dur(s.backoff_base_ms), max: dur(s.backoff_max_ms) },
    timeout: dur(s.timeout_ms),
    priority: s.priority,
    misfire: s.misfire,
    misfire_grace: s.misfire_grace_ms === null ? null : dur(s.misfire_grace_ms),
    catchup_window: dur(s.catchup_window_ms),
    overlap: s.overlap,
    max_queued: s.max_queued,
    window: dur(s.window_ms),
    host_limits: hostLimitsView(s.host_limits),
    async: s.async ?? false,
    verify: s.verify_url ? { url: s.verify_url } : null,
    paused: s.paused,
    paused_reason: s.paused_reason,
    start_at: iso(s.start_at),
    end_at: iso(s.end_at),
    next_fire_at: iso(next),
    next_fire_local: next && rule ? rule.local(next.getTime()) : null,
    last_nominal_at: iso(s.last_nominal_at),
    occurrences: { generated: s.occurrences_generated, skipped: s.occurrences_skipped, misfired: s.occurrences_misfired },
    last_skip_at: iso(s.last_skip_at),
    last_skip_reason: s.last_skip_reason,
    version: s.version,
    created_at: iso(s.created_at),
    updated_at: iso(s.updated_at),
  };
}

/**
 * The next instant the schedule fires. An occurrence made ahead of its instant
 * (SCHEDULER_OCCURRENCE_LEAD) has moved next_fire_at past it; until that instant comes, it is
 * still the next fire.
 */
function nextFire(s: ScheduleRow): Date | null {
  const staged = s.staged_fire_at;
  return staged && staged.getTime() > Date.now() && (s.next_fire_at === null || staged < s.next_fire_at) ? staged : s.next_fire_at;
}
