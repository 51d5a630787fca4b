-- name: StatsJobsByStatus
-- Jobs by status, for one tenant ($1) or all (null).
SELECT status, count(*) AS n FROM jobs WHERE ($1::text IS NULL OR tenant = $1) GROUP BY status;

-- name: StatsBacklog
-- Due and undispatched, overdue by more than $2 ms, the oldest due age; dead letters and the
-- age of the oldest. One tenant ($1) or all.
SELECT
  count(*) FILTER (WHERE status = 'scheduled' AND due_at <= now()) AS due,
  count(*) FILTER (WHERE status = 'scheduled' AND due_at <= now() - make_interval(secs => $2::float8 / 1000)) AS overdue,
  extract(epoch FROM now() - min(due_at) FILTER (WHERE status = 'scheduled' AND due_at <= now())) AS oldest_due_age_s,
  count(*) FILTER (WHERE status = 'dead') AS dead,
  extract(epoch FROM now() - min(finished_at) FILTER (WHERE status = 'dead')) AS oldest_dead_age_s
FROM jobs
WHERE ($1::text IS NULL OR tenant = $1) AND status IN ('scheduled', 'dead');

-- name: StatsRecentAttempts
-- Calls started in the last $2 seconds that have ended (at most $3 of the newest): outcomes,
-- and the start lag of first calls (due instant → call start). One tenant ($1) or all.
-- The window is a range of the primary key: attempt ids are version 7 UUIDs, made when the
-- call's pre-call check opened the attempt (027). No index on finished_at: the completion
-- stays a HOT update. The upper bound keeps the random ids of attempts made before 027 out.
WITH a AS (
  SELECT a.outcome, a.number, extract(epoch FROM a.started_at - j.scheduled_for) AS lag_s,
    extract(epoch FROM a.finished_at - a.started_at) AS exec_s
  FROM attempts a JOIN jobs j ON j.id = a.job_id
  WHERE a.id >= uuid_v7_floor(now() - make_interval(secs => $2::float8))
    AND a.id < uuid_v7_floor(now() + interval '1 hour')
    AND a.finished_at IS NOT NULL
    AND ($1::text IS NULL OR j.tenant = $1)
  ORDER BY a.id DESC
  LIMIT $3
)
SELECT outcome, GROUPING(outcome) = 1 AS is_total, count(*) AS n,
  percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_s) FILTER (WHERE number = 1) AS lag_p50,
  percentile_cont(0.9) WITHIN GROUP (ORDER BY lag_s) FILTER (WHERE number = 1) AS lag_p90,
  percentile_cont(0.99) WITHIN GROUP (ORDER BY lag_s) FILTER (WHERE number = 1) AS lag_p99,
  max(lag_s) FILTER (WHERE number = 1) AS lag_max,
  count(*) FILTER (WHERE number = 1) AS firsts,
  percentile_cont(0.5) WITHIN GROUP (ORDER BY exec_s) AS exec_p50,
  percentile_cont(0.99) WITHIN GROUP (ORDER BY exec_s) AS exec_p99
FROM a GROUP BY ROLLUP (outcome);

-- name: StatsLagBuckets
-- First-call start lag of the same recent attempts, counted into the buckets $4 (seconds,
-- ascending upper bounds; the last bucket is everything above).
WITH a AS (
  SELECT extract(epoch FROM a.started_at - j.scheduled_for) AS lag_s
  FROM attempts a JOIN jobs j ON j.id = a.job_id
  WHERE a.id >= uuid_v7_floor(now() - make_interval(secs => $2::float8))
    AND a.id < uuid_v7_floor(now() + interval '1 hour')
    AND a.finished_at IS NOT NULL AND a.number = 1
    AND ($1::text IS NULL OR j.tenant = $1)
  ORDER BY a.id DESC
  LIMIT $3
)
SELECT width_bucket(lag_s, $4::float8[]) AS bucket, count(*) AS n FROM a GROUP BY 1 ORDER BY 1;
