-- The SQL due-time index: the jobs table itself, walked on jobs_status_due_at.
-- Held occurrences (due_at = 'infinity') are never due.

-- name: IndexDueList
-- Up to $2 scheduled jobs due by $1 (epoch ms), earliest first, ties by id.
SELECT id, due_at FROM jobs
WHERE status = 'scheduled' AND due_at <= timestamptz 'epoch' + $1::bigint * interval '1 millisecond'
ORDER BY due_at, id
LIMIT $2;

-- name: IndexEarliestDue
SELECT due_at FROM jobs WHERE status = 'scheduled' AND due_at < 'infinity' ORDER BY due_at LIMIT 1;

-- name: IndexSize
SELECT count(*) AS n FROM jobs WHERE status = 'scheduled' AND due_at < 'infinity';

-- name: IndexPing
SELECT 1 AS ok;
