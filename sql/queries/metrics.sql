-- name: CountJobsByStatus
SELECT status, count(*) AS n FROM jobs GROUP BY status;

-- name: DueBacklog
-- Due but not yet dispatched, and the age of the oldest such job.
SELECT count(*) AS n, extract(epoch FROM now() - min(due_at)) AS oldest_age_s
FROM jobs WHERE status = 'scheduled' AND due_at <= now();

-- name: DueBacklogByTenant
-- The $1 tenants with the most due, undispatched jobs (a bounded label set for metrics).
SELECT tenant, count(*) AS n FROM jobs
WHERE status = 'scheduled' AND due_at <= now()
GROUP BY tenant ORDER BY count(*) DESC, tenant LIMIT $1;
