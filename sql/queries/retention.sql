-- name: PruneFinishedJobs
-- One bounded batch of finished jobs of one status ($1) that finished more than $2 ms ago,
-- oldest first, and their attempts with them (in this statement: the attempt log has no
-- foreign key since 026). The IN list names every terminal status so the partial index
-- (status, finished_at) applies to a generic plan too; the ARRAY steers the delete to the
-- primary key (an IN list became a scan of all jobs).
WITH d AS (
  DELETE FROM jobs WHERE id = ANY(ARRAY(
    SELECT id FROM jobs
    WHERE status = $1 AND status IN ('succeeded', 'cancelled', 'expired', 'dead')
      AND finished_at < now() - make_interval(secs => $2::float8 / 1000)
    ORDER BY finished_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
  ))
  RETURNING id
), a AS (
  -- By the (job_id, number) key: one probe per pruned job.
  DELETE FROM attempts WHERE job_id = ANY(ARRAY(SELECT id FROM d))
  RETURNING 1
)
SELECT count(*) AS n FROM d;

-- name: PrunePayloads
-- The $2 payloads least recently in use, if not used for $1 ms: those no job or schedule
-- references are deleted; those still referenced are marked in use now, so the next pass
-- looks at others and each pass stays bounded however many old payloads are still needed.
WITH c AS (
  SELECT hash FROM payloads
  WHERE used_at < now() - make_interval(secs => $1::float8 / 1000)
  ORDER BY used_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
), r AS (
  -- Scalar subqueries with LIMIT: one probe of the body_ref index per payload (EXISTS was
  -- planned as a hashed scan of every job).
  SELECT c.hash,
    (SELECT 1 FROM jobs j WHERE j.target->>'body_ref' = c.hash LIMIT 1) IS NOT NULL
      OR (SELECT 1 FROM schedules s WHERE s.target->>'body_ref' = c.hash LIMIT 1) IS NOT NULL AS referenced
  FROM c
), d AS (
  DELETE FROM payloads WHERE hash = ANY(ARRAY(SELECT hash FROM r WHERE NOT referenced))
  RETURNING 1
), t AS (
  UPDATE payloads SET used_at = now() WHERE hash = ANY(ARRAY(SELECT hash FROM r WHERE referenced))
  RETURNING 1
)
SELECT (SELECT count(*) FROM c) AS seen, (SELECT count(*) FROM d) AS pruned, (SELECT count(*) FROM t) AS kept;

-- name: PruneAudit
-- One bounded batch of audit entries older than $1 ms (only when audit retention is set).
WITH d AS (
  DELETE FROM audit_log WHERE id = ANY(ARRAY(
    SELECT id FROM audit_log
    WHERE at < now() - make_interval(secs => $1::float8 / 1000)
    ORDER BY at
    LIMIT $2
  ))
  RETURNING 1
)
SELECT count(*) AS n FROM d;
