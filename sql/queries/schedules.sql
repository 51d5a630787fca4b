-- name: InsertSchedule
-- A repeated id in the tenant inserts nothing (the caller answers 409).
INSERT INTO schedules (tenant, id, cron, timezone, dst_gap, dst_fold, target, priority,
  max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, misfire, misfire_grace_ms,
  catchup_window_ms, overlap, max_queued, window_ms, paused, start_at, end_at, next_fire_at, host_limits, async, verify_url)
SELECT r.tenant, r.id, r.cron, r.timezone, r.dst_gap, r.dst_fold, r.target, r.priority,
  r.max_attempts, r.backoff_base_ms, r.backoff_max_ms, r.timeout_ms, r.misfire, r.misfire_grace_ms,
  r.catchup_window_ms, r.overlap, r.max_queued, r.window_ms, r.paused, r.start_at, r.end_at, r.next_fire_at, r.host_limits,
  coalesce(r.async, false), r.verify_url
FROM jsonb_to_record($1::text::jsonb) AS r(tenant text, id text, cron text, timezone text,
  dst_gap text, dst_fold text, target jsonb, priority int, max_attempts int,
  backoff_base_ms bigint, backoff_max_ms bigint, timeout_ms bigint, misfire text,
  misfire_grace_ms bigint, catchup_window_ms bigint, overlap text, max_queued int,
  window_ms bigint, paused boolean, start_at timestamptz, end_at timestamptz,
  next_fire_at timestamptz, host_limits jsonb, async boolean, verify_url text)
ON CONFLICT (tenant, id) DO NOTHING
RETURNING *;

-- name: GetSchedule
SELECT * FROM schedules WHERE tenant = $1 AND id = $2;

-- name: GetScheduleForUpdate
SELECT * FROM schedules WHERE tenant = $1 AND id = $2 FOR UPDATE;

-- name: ListSchedules
-- Keyset pagination on (tenant, id). Bounded by $4.
SELECT * FROM schedules
WHERE ($1::text IS NULL OR tenant = $1)
  AND ($2::text IS NULL OR (tenant, id) > ($2, $3::text))
ORDER BY tenant, id
LIMIT $4;

-- name: ReplaceSchedule
-- Writes every mutable field (the caller merged the patch) and bumps the version.
UPDATE schedules s SET
  cron = r.cron, timezone = r.timezone, dst_gap = r.dst_gap, dst_fold = r.dst_fold,
  target = r.target, priority = r.priority, max_attempts = r.max_attempts,
  backoff_base_ms = r.backoff_base_ms, backoff_max_ms = r.backoff_max_ms,
  timeout_ms = r.timeout_ms, misfire = r.misfire, misfire_grace_ms = r.misfire_grace_ms,
  catchup_window_ms = r.catchup_window_ms, overlap = r.overlap, max_queued = r.max_queued,
  window_ms = r.window_ms, paused = r.paused, paused_reason = r.paused_reason,
  start_at = r.start_at, end_at = r.end_at, next_fire_at = r.next_fire_at,
  host_limits = r.host_limits, async = coalesce(r.async, false), verify_url = r.verify_url,
  version = s.version + 1, updated_at = now()
FROM jsonb_to_record($1::text::jsonb) AS r(tenant text, id text, cron text, timezone text,
  dst_gap text, dst_fold text, target jsonb, priority int, max_attempts int,
  backoff_base_ms bigint, backoff_max_ms bigint, timeout_ms bigint, misfire text,
  misfire_grace_ms bigint, catchup_window_ms bigint, overlap text, max_queued int,
  window_ms bigint, paused boolean, paused_reason text, start_at timestamptz,
  end_at timestamptz, next_fire_at timestamptz, version int, host_limits jsonb, async boolean, verify_url text)
WHERE s.tenant = r.tenant AND s.id = r.id AND s.version = r.version
RETURNING s.*;

-- name: FlagReleasingOccurrences
-- A schedule just changed to overlap=queue: its occurrences in progress were made under a
-- policy that never holds one back, so their finish did not run the release (029). From now
-- the generator may hold the next one behind them. Under the schedule's row lock (the
-- generator takes it too); a job finishing meanwhile holds its own row lock, so this waits
-- and sees it finished (nothing can wait behind it) or flags it before it finishes.
UPDATE jobs SET releases_held = true
WHERE tenant = $1 AND schedule_id = $2 AND status IN ('scheduled', 'queued', 'running')
  AND NOT releases_held;

-- name: ReleaseAllHeld
-- A schedule just changed from overlap=queue to allow: nothing waits for the one before any
-- more, so every held occurrence is due now. Left held, one could wait for ever: under allow
-- new occurrences do not run the release when they finish (029), and the generator does not
-- look for held ones.
-- use: _ReleaseHeld
WHERE tenant = $1 AND schedule_id = $2 AND status = 'scheduled' AND due_at = 'infinity'
RETURNING id, due_at;

-- name: DeleteSchedule
DELETE FROM schedules WHERE tenant = $1 AND id = $2 RETURNING *;

-- name: CancelPendingOccurrences
-- A deleted schedule fires no more: its occurrences not yet running are cancelled.
UPDATE jobs SET status = 'cancelled', version = version + 1, finished_at = now(),
  updated_at = now(), lease_owner = NULL, lease_until = NULL
WHERE tenant = $1 AND schedule_id = $2 AND status IN ('scheduled', 'queued')
RETURNING id;

-- name: NotifyScheduleDue
-- Payload "s<epoch ms>": a schedule fires then. The "s" tells it from a job's NotifyDue, so
-- that only a schedule opens the dispatchers' generation gate. (A dispatcher from before
-- reads it as no number, and looks at once: harmless.)
SELECT pg_notify('scheduler_due', $1::text);

-- name: DueSchedules
-- Due schedules of the shards $2 (of $3) only: occurrence generation is sharded like claims.
-- With occurrences made $4 ms ahead (031; 0: none), also the schedules firing within that
-- lead, unless making ahead was declined for that instant or the schedule's occurrence made
-- ahead is still to come (one at a time). Due ones come first.
SELECT *, now() AS db_now FROM schedules
WHERE NOT paused AND next_fire_at IS NOT NULL
  AND next_fire_at <= now() + make_interval(secs => $4::float8 / 1000)
  AND (next_fire_at <= now()
       OR (ahead_checked_at IS DISTINCT FROM next_fire_at AND (staged_fire_at IS NULL OR staged_fire_at <= now())))
  AND (slot * $3::int / 4096) = ANY($2::int[])
ORDER BY next_fire_at
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: NextFireAt
-- When generation has work next, for the shards $2 (of $3; null: all, and $4 is then 1): among
-- the first $4 schedules by next fire, the earliest of those shards, how many were read and
-- the last one's fire; with occurrences made $1 ms ahead (031), the same over the schedules
-- that may be made ahead (as DueSchedules picks them) by the instant one may be. None of those
-- shards among a full read: their next is no earlier than the last read (less the lead).
-- Before, it read the first schedule of any shard: one due in a shard another dispatcher holds
-- (its holder dead or behind) kept the gate open, a generation transaction every 5 ms. The
-- made-ahead read walks past the schedules declined in the lead window only, and runs only
-- with a lead (a one-time filter).
-- $5 (null: from the first): fires from then on only, the gate's second look when the first
-- read only other shards' schedules, due already. $5 is when this dispatcher's last pass began:
-- its own due before then that pass made, unless locked. The made-ahead half then starts at a
-- fire past $5 plus the lead: one whose made-ahead occurrence was still to come at $5 is found
-- by its own fire. An index bound either way (coalesce of a parameter).
-- db_now: the database's clock when it answered, from which the gate counts the wait on the
-- process's monotonic clock (OccurrenceGeneration.readNextFire).
SELECT d.*, a.*, now() AS db_now FROM
  (SELECT min(next_fire_at) FILTER (WHERE $2::int[] IS NULL OR (slot * $3::int / 4096) = ANY($2::int[])) AS due_mine,
     max(next_fire_at) AS due_to, count(*)::int AS due_read
   FROM (SELECT next_fire_at, slot FROM schedules
         WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at >= coalesce($5::timestamptz, '-infinity')
         ORDER BY next_fire_at LIMIT $4) due) d,
  (SELECT min(greatest(next_fire_at - make_interval(secs => $1::float8 / 1000), coalesce(staged_fire_at, '-infinity')))
       FILTER (WHERE $2::int[] IS NULL OR (slot * $3::int / 4096) = ANY($2::int[])) AS ahead_mine,
     max(next_fire_at) - make_interval(secs => $1::float8 / 1000) AS ahead_to, count(*)::int AS ahead_read
   FROM (SELECT next_fire_at, staged_fire_at, slot FROM schedules
         WHERE $1::float8 > 0 AND NOT paused AND next_fire_at > now()
           AND next_fire_at >= coalesce($5::timestamptz + make_interval(secs => $1::float8 / 1000), '-infinity')
           AND ahead_checked_at IS DISTINCT FROM next_fire_at
         ORDER BY next_fire_at LIMIT $4) ahead) a;

-- name: LockSchedulesOfJobs
-- The schedules of the jobs $1 (a replay), each locked, in one order (no deadlock between two
-- replays): their occurrences made ahead are taken back before the replay's jobs change.
-- Bounded by the replay's jobs.
SELECT s.* FROM schedules s
WHERE (s.tenant, s.id) IN (SELECT j.tenant, j.schedule_id FROM jobs j WHERE j.id = ANY($1::uuid[]) AND j.schedule_id IS NOT NULL)
ORDER BY s.tenant, s.id
FOR UPDATE OF s;

-- name: UnstageOccurrence
-- Takes back the occurrence made ahead of its instant (031), under the schedule's row lock,
-- which the caller holds: a change to the schedule (pause, PATCH, a manual run or a replay
-- under overlap skip or queue, DELETE) applies as if the occurrence had not been made. A job
-- whose nominal time is still to come was made ahead and cannot have started (it is not due):
-- it is deleted, and next_fire_at goes back to it. Nothing else has a nominal time in the
-- future (occurrences are made at or after theirs, a manual run's is its now()). One already
-- claimed ahead (SCHEDULER_PRESTAGE) is in a worker's hands, as a claimed one-off job is: it
-- stays, and the API goes on showing it as the next fire until its instant.
WITH gone AS (
  DELETE FROM jobs
  WHERE tenant = $1 AND schedule_id = $2 AND status = 'scheduled' AND calls = 0 AND nominal_time > now()
  RETURNING nominal_time
)
UPDATE schedules s SET
  next_fire_at = CASE WHEN (SELECT count(*) FROM gone) > 0 THEN (SELECT min(nominal_time) FROM gone) ELSE s.next_fire_at END,
  occurrences_generated = s.occurrences_generated - (SELECT count(*) FROM gone),
  staged_fire_at = CASE WHEN (SELECT count(*) FROM gone) > 0 OR s.staged_fire_at <= now() THEN NULL ELSE s.staged_fire_at END,
  ahead_checked_at = NULL
WHERE s.tenant = $1 AND s.id = $2
RETURNING *;

-- name: ActiveOccurrences
-- Of each schedule in $1 (a JSON array of {tenant, id}: a generation pass asks once for all
-- its schedules): its occurrences in progress (waiting, queued, running) and held (waiting
-- for the one before). An occurrence past its start-by that never started is not in progress:
-- it can never run (the misfire expiry ends it within a pass or so), and counting it would
-- make overlap=skip drop the next one too, so that neither runs. claimable() is the same test
-- every claim makes. Bounded by the pass's schedules; each by jobs_schedule_active.
SELECT x.tenant, x.id,
       count(j.id) FILTER (WHERE j.due_at <> 'infinity' AND claimable(j.start_by, j.calls)) AS active,
       count(j.id) FILTER (WHERE j.due_at = 'infinity') AS held
FROM json_to_recordset($1::text::json) AS x(tenant text, id text)
LEFT JOIN jobs j ON j.tenant = x.tenant AND j.schedule_id = x.id AND j.status IN ('scheduled', 'queued', 'running')
GROUP BY x.tenant, x.id;

-- name: ExpireCoalesced
-- fire_once: older occurrences not yet started give way to the most recent missed one.
UPDATE jobs SET status = 'expired', finished_at = now(), updated_at = now(),
  lease_owner = NULL, lease_until = NULL, dead_reason = 'misfire',
  last_error = 'misfire: coalesced into a later occurrence (fire_once)'
WHERE tenant = $1 AND schedule_id = $2 AND status IN ('scheduled', 'queued')
  AND calls = 0 AND nominal_time < $3
RETURNING id;

-- name: AdvanceSchedule
-- Moves each schedule in $1 on after a pass (a JSON array: one statement for the pass's
-- schedules): its next fire, the last nominal time generated and the pass's counts; with
-- occurrences made ahead (031), the one made ahead (staged) or the instant declined (checked).
-- Instants as epoch milliseconds; an absent one is NULL.
UPDATE schedules s SET next_fire_at = to_timestamp(x.next_fire_ms / 1000),
  last_nominal_at = coalesce(to_timestamp(x.last_nominal_ms / 1000), s.last_nominal_at),
  occurrences_generated = s.occurrences_generated + x.created,
  occurrences_skipped = s.occurrences_skipped + x.skipped,
  occurrences_misfired = s.occurrences_misfired + x.misfired,
  last_skip_at = CASE WHEN x.skipped > 0 THEN now() ELSE s.last_skip_at END,
  last_skip_reason = CASE WHEN x.skipped > 0 THEN x.skip_reason ELSE s.last_skip_reason END,
  staged_fire_at = coalesce(to_timestamp(x.staged_ms / 1000), s.staged_fire_at),
  ahead_checked_at = coalesce(to_timestamp(x.checked_ms / 1000), s.ahead_checked_at),
  updated_at = now()
FROM json_to_recordset($1::text::json) AS x(tenant text, id text, next_fire_ms float8, last_nominal_ms float8,
  created int, skipped int, misfired int, skip_reason text, staged_ms float8, checked_ms float8)
WHERE s.tenant = x.tenant AND s.id = x.id;

-- name: _ReleaseHeld
-- A held occurrence made due now. Waiting for the one before is not a misfire: its grace
-- (start-by) and catch-up count from the release (as release_held_occurrence in 002 does).
UPDATE jobs SET due_at = now(), updated_at = now(), scheduled_for = now(),
  start_by = now() + (start_by - scheduled_for),
  catchup_after = now() + (catchup_after - scheduled_for)

-- name: ReleaseOldestHeld
-- Backstop for the release trigger: nothing of the schedule in progress, one held.
-- use: _ReleaseHeld
WHERE id = (
  SELECT id FROM jobs
  WHERE tenant = $1 AND schedule_id = $2 AND status = 'scheduled' AND due_at = 'infinity'
  ORDER BY nominal_time LIMIT 1
)
RETURNING id;

-- name: PauseBrokenSchedule
-- A schedule whose generation fails (a rule this version no longer accepts, say) is paused
-- with the reason, so that it cannot hold back every other schedule and job.
UPDATE schedules SET paused = true, paused_reason = $3, version = version + 1, updated_at = now()
WHERE tenant = $1 AND id = $2;

-- name: CountTenantSchedules
-- The tenant's schedules, as the triggers of migration 030 keep them: one row, whatever the
-- count. Read after the insert, whose trigger holds that row to the commit (insertSchedule).
SELECT coalesce((SELECT n FROM tenant_schedules WHERE tenant = $1), 0) AS n;
