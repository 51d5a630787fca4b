-- Async (long-running) jobs. Every write is checked against the job's lease generation: a
-- token from an older attempt changes nothing. The lease owner is not checked: the target's
-- heartbeat may arrive before the worker has recorded the acceptance.

-- name: AcceptAsync
-- The target answered 2xx to an async call: the worker's part is done. The job stays
-- running under the async lease (owner 'async'), its execution ceiling counted from the
-- attempt's start; the attempt stays open (in flight) until the target reports.
-- $1 worker owner, $2 job id, $3 generation, $4 async lease ms, $5 attempt id, $6 HTTP status.
WITH j AS (
  UPDATE jobs j SET lease_owner = 'async',
    lease_until = greatest(j.lease_until, now() + make_interval(secs => $4::float8 / 1000)),
    deadline_at = a.started_at + make_interval(secs => j.timeout_ms::float8 / 1000),
    updated_at = now()
  FROM attempts a
  WHERE j.id = $2::uuid AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = $3
    AND a.id = $5::uuid
  RETURNING j.id
), a AS (
  UPDATE attempts SET http_status = $6 WHERE id = $5::uuid AND outcome IS NULL RETURNING id
)
SELECT j.id FROM j;

-- name: HeartbeatAsync
-- Renews the async lease and, when $4, replaces the checkpoint with $5 (null clears it).
-- Nothing changes once the execution ceiling has passed.
UPDATE jobs j SET lease_until = now() + make_interval(secs => $3::float8 / 1000),
  checkpoint = CASE WHEN $4::boolean THEN $5::text ELSE j.checkpoint END,
  updated_at = now()
WHERE j.id = $1::uuid AND j.async AND j.status = 'running' AND j.lease_generation = $2
  AND (j.deadline_at IS NULL OR j.deadline_at > now())
RETURNING j.lease_until, j.cancel_requested, j.deadline_at;

-- name: FinishAsync
-- Ends an async attempt: the target's report, or its execution ceiling. A cancel wins over
-- a retry, not over a success (that work was done). The open attempt records the outcome.
-- $1 id, $2 generation, $3 next status, $4 retry delay ms (null: keep due_at),
-- $5 counts a try, $6 last_error, $7 dead_reason, $8 attempt outcome, $9 attempt error,
-- $10 possibly delivered, $11 refuse past the execution ceiling (a target's report: the
-- ceiling has already decided that attempt).
WITH j AS (
  UPDATE jobs j SET
    status = CASE WHEN j.cancel_requested AND $3::text <> 'succeeded' THEN 'cancelled' ELSE $3::text END,
    due_at = CASE WHEN $4::bigint IS NULL THEN j.due_at ELSE now() + make_interval(secs => $4::float8 / 1000) END,
    tries = j.tries + CASE WHEN $5::boolean THEN 1 ELSE 0 END,
    lease_owner = NULL, lease_until = NULL, deadline_at = NULL,
    last_error = $6::text,
    dead_reason = CASE WHEN $3::text = 'dead' AND NOT j.cancel_requested THEN $7::text ELSE j.dead_reason END,
    finished_at = CASE WHEN j.cancel_requested OR $3::text <> 'scheduled' THEN now() END,
    updated_at = now()
  WHERE j.id = $1::uuid AND j.async AND j.status = 'running' AND j.lease_generation = $2
    AND (NOT $11::boolean OR j.deadline_at IS NULL OR j.deadline_at > now())
  RETURNING j.*
), a AS (
  UPDATE attempts a SET finished_at = now(), outcome = $8::text, error = $9::text, possibly_delivered = $10::boolean
  FROM j WHERE a.job_id = j.id AND a.lease_generation = $2 AND a.outcome IS NULL
  RETURNING a.id
)
SELECT * FROM j;

-- name: AsyncPastDeadline
-- Running async attempts past their execution ceiling, oldest first (bounded).
SELECT * FROM jobs
WHERE status = 'running' AND deadline_at IS NOT NULL AND deadline_at <= now()
ORDER BY deadline_at LIMIT $1;
