-- Tables and queries of the receiver kit (scheduler/receiver). They live in the RECEIVER's
-- database (the webhook target's), not the scheduler's.

-- name: Migrate
-- Idempotent: safe to run at every start.
-- processed: one row per webhook-id whose effect committed, with the answer it gave, so a
-- repeated call returns that answer and the verify GET can say "processed".
CREATE TABLE IF NOT EXISTS scheduler_receiver_processed (
  webhook_id   text PRIMARY KEY,
  result       jsonb,
  processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS scheduler_receiver_processed_at ON scheduler_receiver_processed (processed_at);
-- fencing: the highest Scheduler-Fencing-Token seen per job; a call with a lower one is stale.
CREATE TABLE IF NOT EXISTS scheduler_receiver_fencing (
  job_id  text PRIMARY KEY,
  token   numeric(20, 0) NOT NULL,
  seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS scheduler_receiver_fencing_seen_at ON scheduler_receiver_fencing (seen_at);

-- name: ClaimMarker
-- The first of concurrent calls with one webhook-id inserts; the others wait here for it to
-- commit (then find its marker) or roll back (then insert themselves).
INSERT INTO scheduler_receiver_processed (webhook_id) VALUES ($1)
ON CONFLICT (webhook_id) DO NOTHING
RETURNING webhook_id;

-- name: SetMarkerResult
UPDATE scheduler_receiver_processed SET result = $2::text::jsonb, processed_at = now() WHERE webhook_id = $1;

-- name: GetMarker
SELECT result, processed_at FROM scheduler_receiver_processed WHERE webhook_id = $1;

-- name: RaiseFencing
-- Keeps the highest token per job and answers it: higher than the caller's means stale.
INSERT INTO scheduler_receiver_fencing AS f (job_id, token) VALUES ($1, $2::numeric)
ON CONFLICT (job_id) DO UPDATE SET token = greatest(f.token, excluded.token), seen_at = now()
RETURNING token::text AS token;

-- name: PruneProcessed
-- Retention: markers (and fencing rows) older than $1 ms, at most $2 per statement.
WITH gone AS (
  DELETE FROM scheduler_receiver_processed WHERE webhook_id IN (
    SELECT webhook_id FROM scheduler_receiver_processed
    WHERE processed_at < now() - make_interval(secs => $1::float8 / 1000) LIMIT $2)
  RETURNING 1
), fences AS (
  DELETE FROM scheduler_receiver_fencing WHERE job_id IN (
    SELECT job_id FROM scheduler_receiver_fencing
    WHERE seen_at < now() - make_interval(secs => $1::float8 / 1000) LIMIT $2)
  RETURNING 1
)
SELECT (SELECT count(*) FROM gone)::int AS markers, (SELECT count(*) FROM fences)::int AS fences;
