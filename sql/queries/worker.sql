-- name: ClaimQueued
-- Takes queued jobs in dispatch order (then highest priority first), under a lease: owner +
-- a new generation. $5: the pre-staging horizon (ms): a job due that soon is taken and held
-- by the worker until its due instant (StartAttempts refuses it before then).
WITH c AS (
  SELECT id FROM jobs
  WHERE status = 'queued' AND due_at <= now() + make_interval(secs => $5::float8 / 1000) AND (expires_at IS NULL OR expires_at > now())
    AND (start_by IS NULL OR start_by > now() OR calls > 0)
    -- Workers outside the home region take nothing ($4: this worker's region).
    AND EXISTS (SELECT 1 FROM region_authority WHERE home_region = $4)
    -- $6: reserved slots serve only jobs of at least this priority (null: any).
    AND ($6::int IS NULL OR priority >= $6::int)
  ORDER BY queued_at, priority DESC, due_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'running', lease_owner = $1,
  lease_generation = j.lease_generation + 1,
  lease_until = now() + make_interval(secs => $3::float8 / 1000), updated_at = now()
FROM c WHERE j.id = c.id
RETURNING j.*;

-- name: StartAttempts
-- The check right before calling: still ours (owner + generation), same version (no cancel
-- or reschedule since the claim), not flagged cancelled, due, and this worker's region ($5)
-- holds the authority at the generation the job was claimed under: a claim made before a
-- region failover is never called after it. Only jobs that pass get an attempt row and are
-- called.
WITH auth AS (
  SELECT generation FROM region_authority WHERE home_region = $5
), ok AS (
  UPDATE jobs j SET calls = j.calls + 1, updated_at = now(),
    -- An occurrence whose first call starts past its grace is a catch-up run, and stays one.
    catchup = j.catchup OR (j.calls = 0 AND j.catchup_after IS NOT NULL AND now() > j.catchup_after)
  FROM unnest($2::uuid[], $3::int[], $4::int[]) AS x(id, gen, ver), auth
  WHERE j.id = x.id AND j.status = 'running' AND j.lease_owner = $1
    AND j.epoch >= auth.generation * 4294967296
    AND j.lease_generation = x.gen AND j.version = x.ver
    AND NOT j.cancel_requested AND j.due_at <= now()
    AND (j.expires_at IS NULL OR j.expires_at > now())
    AND (j.start_by IS NULL OR j.start_by > now() OR j.calls > 0)
  RETURNING j.id, j.calls, j.lease_generation, j.epoch, j.catchup
), ins AS (
  INSERT INTO attempts (id, job_id, number, lease_generation, epoch, worker, started_at)
  SELECT gen_random_uuid(), ok.id, ok.calls, ok.lease_generation, ok.epoch, $1, now() FROM ok
  RETURNING id, job_id, number
)
-- The catch-up flag comes from the job row by primary key, computed as in `ok` from the
-- row as it was before this statement (what `j` sees here): joining the two CTEs instead
-- was a nested loop over both, quadratic in the batch (found by the herd bench).
SELECT ins.id AS attempt_id, ins.job_id, ins.number,
  (j.catchup OR (j.calls = 0 AND j.catchup_after IS NOT NULL AND now() > j.catchup_after)) AS catchup
FROM ins JOIN jobs j ON j.id = ins.job_id;

-- name: RenewLeases
UPDATE jobs j SET lease_until = now() + make_interval(secs => $4::float8 / 1000)
FROM unnest($2::uuid[], $3::int[]) AS x(id, gen)
WHERE j.id = x.id AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = x.gen
RETURNING j.id, j.cancel_requested;

-- name: CompleteAttempts
-- Applies a batch of outcomes. The job row changes only under the same owner + generation:
-- a late completion after a reclaim changes nothing. The attempt row always records what
-- really happened on that call.
WITH r AS (
  -- sig: how a job that dies here died (see 009_dlq.sql), for quarantine of poison jobs.
  SELECT r.*, CASE WHEN r.next_status = 'dead' THEN r.dead_reason || ':' || coalesce(r.http_status::text, r.outcome) END AS sig
  FROM jsonb_to_recordset($2::text::jsonb) AS r(
    job_id uuid, gen int, attempt_id uuid, outcome text, http_status int, error text,
    possibly_delivered boolean, started_at timestamptz, finished_at timestamptz,
    next_status text, next_delay_ms bigint, last_error text, counts_try boolean,
    throttle_until timestamptz, dead_reason text)
), locked AS (
  -- Lock order: the schedules of the batch's occurrences first, in key order. Each one that
  -- finishes fires the release trigger, which locks its schedule; left to the trigger, the
  -- locks are taken in job order, and two batches can each hold a schedule the other waits
  -- for (a deadlock). Taken here in one order, a batch waits at most for a whole other one.
  SELECT s.tenant, s.id FROM schedules s
  WHERE (s.tenant, s.id) IN (
    SELECT o.tenant, o.schedule_id FROM jobs o
    WHERE o.id = ANY(ARRAY(SELECT job_id FROM r)) AND o.schedule_id IS NOT NULL)
  ORDER BY s.tenant, s.id
  FOR NO KEY UPDATE
), j AS (
  UPDATE jobs j SET
    -- A cancel wins over a retry, not over a success: that call's effect happened.
    status = CASE WHEN j.cancel_requested AND r.next_status <> 'succeeded' THEN 'cancelled' ELSE r.next_status END,
    -- Retry delays count from the database's clock, the one eligibility is checked against.
    due_at = CASE WHEN r.next_delay_ms IS NULL THEN j.due_at
                  ELSE now() + make_interval(secs => r.next_delay_ms::float8 / 1000) END,
    tries = j.tries + CASE WHEN r.counts_try THEN 1 ELSE 0 END,
    throttle_until = coalesce(j.throttle_until, r.throttle_until),
    lease_owner = NULL, lease_until = NULL,
    last_error = r.last_error,
    dead_reason = CASE WHEN r.next_status = 'dead' THEN r.dead_reason ELSE j.dead_reason END,
    dead_signature = CASE WHEN r.sig IS NULL OR j.cancel_requested THEN j.dead_signature ELSE r.sig END,
    dead_streak = CASE WHEN r.sig IS NULL OR j.cancel_requested THEN j.dead_streak
                       WHEN j.dead_signature = r.sig THEN j.dead_streak + 1 ELSE 1 END,
    finished_at = CASE WHEN j.cancel_requested OR r.next_status <> 'scheduled' THEN now() END,
    updated_at = now()
  FROM r
  -- The key lists steer the planner to the primary keys: left to itself it starts from the
  -- status index, which is full of dead 'running' entries in a busy table.
  WHERE j.id = ANY(ARRAY(SELECT job_id FROM r)) AND j.id = r.job_id
    AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = r.gen
    -- Evaluated once, before the first row: every schedule lock is held before any job's.
    AND (SELECT count(*) FROM locked) >= 0
  RETURNING j.id, j.status, j.tenant, j.schedule_id
), gone AS (
  -- 410 Gone from a schedule's target: the endpoint is retired, stop generating for it.
  UPDATE schedules s SET paused = true, updated_at = now(), version = s.version + 1,
    paused_reason = 'the target answered 410 Gone at ' || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
  FROM j JOIN r ON r.job_id = j.id
  WHERE r.http_status = 410 AND j.schedule_id IS NOT NULL
    AND s.tenant = j.tenant AND s.id = j.schedule_id AND NOT s.paused
  RETURNING s.id
), a AS (
  UPDATE attempts a SET started_at = r.started_at, finished_at = r.finished_at,
    outcome = r.outcome, http_status = r.http_status, error = r.error,
    possibly_delivered = r.possibly_delivered
  FROM r WHERE a.id = ANY(ARRAY(SELECT attempt_id FROM r)) AND a.id = r.attempt_id
    AND (a.outcome IS NULL OR a.outcome = 'lost')
  RETURNING a.id
)
SELECT j.id, j.status FROM j;

-- name: ReleaseJobs
-- Graceful stop or a discarded dispatch: give claimed-but-not-called jobs back at once.
UPDATE jobs j SET
  status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'scheduled' END,
  finished_at = CASE WHEN j.cancel_requested THEN now() END,
  lease_owner = NULL, lease_until = NULL, updated_at = now()
FROM unnest($2::uuid[], $3::int[]) AS x(id, gen)
WHERE j.id = x.id AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = x.gen
RETURNING j.id, j.status;

-- name: DeferJobs
-- Claimed but not called (its target host is at its rate or concurrency limit, slowed, or
-- paused by a Retry-After): back to scheduled at a later instant (never an earlier one),
-- without a call and without using up an attempt.
UPDATE jobs j SET
  status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'scheduled' END,
  finished_at = CASE WHEN j.cancel_requested THEN now() END,
  due_at = greatest(j.due_at, x.due_at), lease_owner = NULL, lease_until = NULL, updated_at = now()
FROM unnest($2::uuid[], $3::int[], $4::timestamptz[]) AS x(id, gen, due_at)
WHERE j.id = x.id AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = x.gen
RETURNING j.id;

-- name: NotifyDeferred
-- Wakes the dispatchers for jobs handed back: the payload is the earliest new due instant, in epoch ms.
SELECT pg_notify('scheduler_due', $1::text);
