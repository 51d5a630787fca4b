-- Dead-letter queue. A dead job's dead_at is its finished_at. Lists walk the partial indexes
-- of 009_dlq.sql in (dead_at, id) order, oldest death first; the cursor ($8, $9) is the last
-- row's exact dead_at (microseconds, as text) and id. $7: SCHEDULER_DLQ_QUARANTINE_AFTER.
-- Filters: $2 schedule_id, $3 prefix of the failure signature (or of dead_reason),
-- $4/$5 dead at or after / before, $6 quarantined or not.

-- name: ListDeadInTenant
SELECT *, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS dead_key
FROM jobs
WHERE status = 'dead' AND tenant = $1
  AND ($2::text IS NULL OR schedule_id = $2)
  AND ($3::text IS NULL OR starts_with(coalesce(dead_signature, dead_reason, ''), $3))
  AND ($4::timestamptz IS NULL OR finished_at >= $4)
  AND ($5::timestamptz IS NULL OR finished_at < $5)
  AND ($6::boolean IS NULL OR (dead_streak > $7::int) = $6)
  AND ($8::timestamptz IS NULL OR (finished_at, id) > ($8::timestamptz, $9::uuid))
ORDER BY finished_at, id
LIMIT $10;

-- name: ListDeadAll
-- ListDeadInTenant across tenants (a "*" token without a tenant filter): the parameters
-- shift down by one.
SELECT *, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS dead_key
FROM jobs
WHERE status = 'dead'
  AND ($1::text IS NULL OR schedule_id = $1)
  AND ($2::text IS NULL OR starts_with(coalesce(dead_signature, dead_reason, ''), $2))
  AND ($3::timestamptz IS NULL OR finished_at >= $3)
  AND ($4::timestamptz IS NULL OR finished_at < $4)
  AND ($5::boolean IS NULL OR (dead_streak > $6::int) = $5)
  AND ($7::timestamptz IS NULL OR (finished_at, id) > ($7::timestamptz, $8::uuid))
ORDER BY finished_at, id
LIMIT $9;

-- name: ReplayJobs
-- Dead → scheduled, same id: due at $2 (null: now) plus each job's offset, a full set of
-- tries, a new version (so nothing stale from its old life can act on it), counted as a
-- replay. Only rows still dead at the version the checks saw ($1 items) change. A replay is
-- not a misfire-policy run: catchup off, start_by gone (the operator asked for it now).
-- dead_signature and dead_streak stay: the next death is compared with them. So does the
-- epoch (fencing token): the replay's calls carry no lower token than the job's earlier ones.
UPDATE jobs j SET
  status = 'scheduled',
  due_at = coalesce($2::timestamptz, now()) + make_interval(secs => x.offset_ms / 1000),
  scheduled_for = coalesce($2::timestamptz, now()) + make_interval(secs => x.offset_ms / 1000),
  tries = 0, throttle_until = NULL, version = j.version + 1, replays = j.replays + 1,
  replay = true, catchup = false, start_by = NULL, cancel_requested = false,
  -- In progress again: a held occurrence may come to wait behind it, whatever the policy was (029).
  releases_held = j.releases_held OR j.schedule_id IS NOT NULL,
  lease_owner = NULL, lease_until = NULL, queued_at = NULL,
  finished_at = NULL, dead_reason = NULL, updated_at = now()
FROM unnest($1::uuid[], $3::int[], $4::float8[]) AS x(id, ver, offset_ms)
WHERE j.id = x.id AND j.status = 'dead' AND j.version = x.ver
  AND ($5::text IS NULL OR j.tenant = $5)
RETURNING j.*;

-- name: PeekReplayPace
-- The first instant a bulk replay may use (read only: dry runs).
SELECT greatest(now(), next_at) AS start FROM dlq_replay_pace;

-- name: ReserveReplayPace
-- Takes $1 slots $2 ms apart from the next free instant and returns the first. The row lock
-- queues concurrent bulk replays one after the other.
WITH cur AS (SELECT greatest(now(), next_at) AS start FROM dlq_replay_pace FOR UPDATE)
UPDATE dlq_replay_pace p SET next_at = cur.start + make_interval(secs => $1::float8 * $2::float8 / 1000)
FROM cur
RETURNING cur.start;

-- name: DlqOldest
-- For scheduler_dlq_oldest_age_seconds: the oldest death (on the jobs_dead index).
SELECT extract(epoch FROM now() - finished_at) AS age_s FROM jobs
WHERE status = 'dead' ORDER BY finished_at, id LIMIT 1;
