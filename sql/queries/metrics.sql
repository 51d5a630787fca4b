-- name: CountJobsByStatus
SELECT status, count(*) AS n FROM jobs GROUP BY status;

-- name: DueBacklogByTenant
-- The $1 tenants with the most due, undispatched jobs (a bounded label set for metrics),
-- each row also carrying the total over all tenants, counted in the same snapshot.
SELECT tenant, n, sum(n) OVER () AS total FROM (
  SELECT tenant, count(*) AS n FROM jobs
  WHERE status = 'scheduled' AND due_at <= now()
  GROUP BY tenant
) t
ORDER BY n DESC, tenant LIMIT $1;

-- name: DueSoon
-- The forecast: scheduled jobs due within the next 1, 5 and 15 minutes (on the status,
-- due_at index; bounded by what the next 15 minutes hold).
SELECT count(*) FILTER (WHERE due_at <= now() + interval '1 minute') AS m1,
  count(*) FILTER (WHERE due_at <= now() + interval '5 minutes') AS m5,
  count(*) AS m15
FROM jobs WHERE status = 'scheduled' AND due_at > now() AND due_at <= now() + interval '15 minutes';

-- name: DueBacklogBreakdown
-- The due, undispatched jobs read once for every backlog gauge: the total, how many are
-- overdue by more than $2 ms and the oldest's age; the $1 tenants with the most; each
-- dispatch shard (of $3) with its count and oldest age.
WITH d AS MATERIALIZED (
  SELECT tenant, (slot * $3::int / 4096) AS shard, due_at FROM jobs
  WHERE status = 'scheduled' AND due_at <= now()
)
SELECT 'total' AS kind, NULL::text AS key, count(*) AS n,
  count(*) FILTER (WHERE due_at <= now() - make_interval(secs => $2::float8 / 1000)) AS overdue,
  extract(epoch FROM now() - min(due_at))::float8 AS oldest_age_s
FROM d
UNION ALL
(SELECT 'tenant', tenant, count(*), NULL::bigint, NULL::float8 FROM d GROUP BY tenant ORDER BY count(*) DESC, tenant LIMIT $1)
UNION ALL
SELECT 'shard', shard::text, count(*), NULL::bigint, extract(epoch FROM now() - min(due_at))::float8 FROM d GROUP BY shard;

-- name: GrowingTables
-- Tables of $1 (this schema's) that have at least doubled, by 1000 rows or more, since the last
-- analyze (reltuples is -1 before the first): see TableAnalyzer.
SELECT s.relname AS table, s.n_live_tup AS rows, c.reltuples::bigint AS analyzed
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND s.relname = ANY($1::text[])
  AND s.n_live_tup >= 1000 AND s.n_live_tup > 2 * greatest(c.reltuples, 0);
