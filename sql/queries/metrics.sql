-- name: CountJobsByStatus
SELECT status, count(*) AS n FROM jobs GROUP BY status;

-- name: DueBacklog
-- Due but not yet dispatched, how many of them by more than $1 ms (overdue), and the age of
-- the oldest such job.
SELECT count(*) AS n,
  count(*) FILTER (WHERE due_at <= now() - make_interval(secs => $1::float8 / 1000)) AS overdue,
  extract(epoch FROM now() - min(due_at)) AS oldest_age_s
FROM jobs WHERE status = 'scheduled' AND due_at <= now();


-- name: DueBacklogByTenant
-- The $1 tenants with the most due, undispatched jobs (a bounded label set for metrics),
-- each row also carrying the total over all tenants, counted in the same snapshot.
SELECT tenant, n, sum(n) OVER () AS total FROM (
  SELECT tenant, count(*) AS n FROM jobs
  WHERE status = 'scheduled' AND due_at <= now()
  GROUP BY tenant
) t
ORDER BY n DESC, tenant LIMIT $1;

-- name: DueBacklogByShard
-- Due, undispatched jobs per dispatch shard (of $1), with the oldest due instant's age.
SELECT (slot * $1::int / 4096) AS shard, count(*) AS n, extract(epoch FROM now() - min(due_at)) AS oldest_age_s
FROM jobs WHERE status = 'scheduled' AND due_at <= now()
GROUP BY 1;

-- name: DueSoon
-- The forecast: scheduled jobs due within the next 1, 5 and 15 minutes (on the status,
-- due_at index; bounded by what the next 15 minutes hold).
SELECT count(*) FILTER (WHERE due_at <= now() + interval '1 minute') AS m1,
  count(*) FILTER (WHERE due_at <= now() + interval '5 minutes') AS m5,
  count(*) AS m15
FROM jobs WHERE status = 'scheduled' AND due_at > now() AND due_at <= now() + interval '15 minutes';
