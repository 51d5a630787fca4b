-- name: PruneFinishedJobs
-- One bounded batch of finished jobs of one status ($1) that finished more than $2 ms ago,
-- oldest first; their attempts go with them (ON DELETE CASCADE). The IN list names every
-- terminal status so the partial index (status, finished_at) applies to a generic plan too.
WITH d AS (
  DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE status = $1 AND status IN ('succeeded', 'cancelled', 'expired', 'dead')
      AND finished_at < now() - make_interval(secs => $2::float8 / 1000)
    ORDER BY finished_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
  )
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
  SELECT c.hash,
    EXISTS (SELECT 1 FROM jobs j WHERE j.target->>'body_ref' = c.hash)
      OR EXISTS (SELECT 1 FROM schedules s WHERE s.target->>'body_ref' = c.hash) AS referenced
  FROM c
), d AS (
  DELETE FROM payloads p USING r WHERE p.hash = r.hash AND NOT r.referenced
  RETURNING 1
), t AS (
  UPDATE payloads p SET used_at = now() FROM r WHERE p.hash = r.hash AND r.referenced
  RETURNING 1
)
SELECT (SELECT count(*) FROM c) AS seen, (SELECT count(*) FROM d) AS pruned, (SELECT count(*) FROM t) AS kept;

-- name: PruneAudit
-- One bounded batch of audit entries older than $1 ms (only when audit retention is set).
WITH d AS (
  DELETE FROM audit_log WHERE id IN (
    SELECT id FROM audit_log
    WHERE at < now() - make_interval(secs => $1::float8 / 1000)
    ORDER BY at
    LIMIT $2
  )
  RETURNING 1
)
SELECT count(*) AS n FROM d;
