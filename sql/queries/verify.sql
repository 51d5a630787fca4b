-- name: LastUnknownAttemptOf
-- Verify before retry: the job's latest call whose outcome is unknown (possibly_delivered: a
-- timeout, a connection lost after send, or a lost worker). Not only the very last call: one
-- refused while the target restarted after such a call leaves the question open.
SELECT id, number, outcome, possibly_delivered FROM attempts
WHERE job_id = $1::uuid AND possibly_delivered ORDER BY number DESC LIMIT 1;

-- name: CompleteVerified
-- The target's verify URL said the possibly delivered call ($4, an attempt id) was
-- processed: the job ends succeeded without another call, under the same owner ($1) and
-- lease generation ($3) as any completion, and that attempt is marked verified. A cancel
-- asked meanwhile does not win: the call's effect happened (as in CompleteAttempts).
-- The job's schedule is locked first, in the order CompleteAttempts takes it, when the release
-- trigger fired by this update locks it too (releases_held, 029).
WITH locked AS (
  SELECT s.id FROM schedules s JOIN jobs o ON s.tenant = o.tenant AND s.id = o.schedule_id
  WHERE o.id = $2::uuid AND o.releases_held
  FOR NO KEY UPDATE OF s
), j AS (
  UPDATE jobs j SET status = 'succeeded', lease_owner = NULL, lease_until = NULL,
    last_error = NULL, finished_at = now(), updated_at = now()
  WHERE j.id = $2::uuid AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = $3::int
    AND (SELECT count(*) FROM locked) >= 0
  RETURNING j.id
), a AS (
  UPDATE attempts a SET verified = true FROM j WHERE a.id = $4::uuid AND a.job_id = j.id
  RETURNING a.id
)
SELECT j.id, (SELECT count(*) FROM a)::int AS marked FROM j;
