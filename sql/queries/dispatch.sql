-- name: ClaimDue
-- Fenced claim: succeeds only while the lease row still names this owner and epoch, checked
-- in the same statement, so a paused leader whose lease was taken claims nothing.
-- With a worker owner ($7) the jobs go straight to running under that worker's lease (a
-- worker in the dispatcher's own process: one statement instead of two); without, to
-- queued for any worker.
WITH lease AS (
  SELECT 1 FROM leases WHERE name = $1 AND owner = $2 AND epoch = $3 AND lease_until > now()
), due AS (
  SELECT id FROM jobs
  WHERE status = 'scheduled' AND due_at <= now()
    AND (expires_at IS NULL OR expires_at > now())
    AND EXISTS (SELECT 1 FROM lease)
  ORDER BY due_at
  LIMIT $4
  FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET
  status = CASE WHEN $7::text IS NULL THEN 'queued' ELSE 'running' END,
  epoch = $5, queued_at = now(), lease_owner = $7::text,
  lease_generation = j.lease_generation + CASE WHEN $7::text IS NULL THEN 0 ELSE 1 END,
  lease_until = now() + make_interval(secs => $6::float8 / 1000), updated_at = now()
FROM due WHERE j.id = due.id
RETURNING j.*;

-- name: ExpireDue
-- Jobs not started by expires_at never run.
WITH x AS (
  SELECT id FROM jobs
  WHERE status = 'scheduled' AND due_at <= now() AND expires_at <= now()
  ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'expired', finished_at = now(), updated_at = now(),
  last_error = coalesce(j.last_error, 'expired: not started before expires_at')
FROM x WHERE j.id = x.id
RETURNING j.id;

-- name: NextDueAt
SELECT due_at FROM jobs WHERE status = 'scheduled' ORDER BY due_at LIMIT 1;

-- name: NotifyQueued
SELECT pg_notify('scheduler_queued', $1::text);

-- name: ReapExpiredLeases
-- Queued or running rows whose lease passed (plus the clock-skew margin) go back to
-- scheduled; an attempt that was in flight is recorded as lost and counts as a try.
WITH r AS (
  SELECT id, status FROM jobs
  WHERE status IN ('queued', 'running')
    AND lease_until < now() - make_interval(secs => $2::float8 / 1000)
  ORDER BY lease_until LIMIT $1 FOR UPDATE SKIP LOCKED
), u AS (
  UPDATE jobs j SET
    status = CASE
      WHEN j.cancel_requested THEN 'cancelled'
      WHEN r.status = 'running' AND j.tries + 1 >= j.max_attempts THEN 'dead'
      ELSE 'scheduled' END,
    tries = j.tries + CASE WHEN r.status = 'running' THEN 1 ELSE 0 END,
    lease_owner = NULL, lease_until = NULL, updated_at = now(),
    finished_at = CASE WHEN j.cancel_requested OR (r.status = 'running' AND j.tries + 1 >= j.max_attempts) THEN now() END,
    dead_reason = CASE WHEN NOT j.cancel_requested AND r.status = 'running' AND j.tries + 1 >= j.max_attempts THEN 'lease_lost' ELSE j.dead_reason END,
    last_error = CASE WHEN r.status = 'running'
      THEN 'lease expired: the worker stopped renewing (crash, kill or pause)' ELSE j.last_error END
  FROM r WHERE j.id = r.id
  RETURNING j.id, r.status AS was, j.status AS now_status
), a AS (
  UPDATE attempts a SET outcome = 'lost', finished_at = now(), possibly_delivered = true,
    error = 'the worker lost its lease before reporting an outcome'
  FROM u WHERE a.job_id = u.id AND a.outcome IS NULL
  RETURNING a.job_id
)
SELECT u.id, u.was, u.now_status, (SELECT count(*) FROM a) AS lost_attempts FROM u;
