-- name: CountJobsByStatus
SELECT status, count(*) AS n FROM jobs GROUP BY status;

-- name: DueBacklog
-- Due but not yet dispatched, and the age of the oldest such job.
SELECT count(*) AS n, extract(epoch FROM now() - min(due_at)) AS oldest_age_s
FROM jobs WHERE status = 'scheduled' AND due_at <= now();
