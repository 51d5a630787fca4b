-- name: _InsertJobRows
-- The insert of InsertJobs and InsertJobsUnkeyed: a batch of jobs given as a JSON array. A job without due_at is due delay_ms after the
-- database's now(): the database's clock decides, never the caller's.
-- Returns, of each row inserted, only what the database decided (its times, the epoch, the
-- slot, the schema version): the caller has the rest, and the state columns a new job has
-- are their defaults (insertedRow). Whole rows (the target's JSON above all) cost more to
-- send and to parse than the insert itself (bench/README.md, "creation"). The batch is read
-- with json_to_recordset, not jsonb_to_recordset: the text is parsed once, not first into a
-- jsonb value of the whole batch.
-- The target and host limits are read as json and cast to jsonb in the select list: a jsonb
-- column of json_to_recordset cost ~12 µs a row more than json plus the cast (one
-- connection, 5000-job batches: 46 -> 32 µs of backend CPU a job; bench/README.md, "creation").
-- Instants come as epoch milliseconds, absent values as absent keys (insertJson in
-- src/store/jobs.ts): cheaper to write and to read than ISO text.
INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, priority, idempotency_key, request_hash,
                  schedule_id, nominal_time, target, max_attempts, backoff_base_ms,
                  backoff_max_ms, timeout_ms, expires_at, window_ms, async,
                  start_by, catchup_after, catchup, host_limits, verify_url, releases_held)
SELECT r.id, r.tenant, 'scheduled', d.due_at, coalesce(to_timestamp(r.scheduled_for_ms / 1000), d.due_at), r.priority,
       r.idempotency_key, r.request_hash,
       r.schedule_id, to_timestamp(r.nominal_time_ms / 1000), r.target::jsonb, r.max_attempts, r.backoff_base_ms,
       r.backoff_max_ms, r.timeout_ms, to_timestamp(r.expires_at_ms / 1000), r.window_ms, r.async,
       to_timestamp(r.start_by_ms / 1000), to_timestamp(r.catchup_after_ms / 1000), coalesce(r.catchup, false),
       r.host_limits::jsonb, r.verify_url, coalesce(r.releases_held, false)
FROM json_to_recordset($1::text::json) AS r(
  id uuid, tenant text, due_at_ms float8, delay_ms bigint, scheduled_for_ms float8, priority int, idempotency_key text,
  request_hash text, schedule_id text, nominal_time_ms float8, target json,
  max_attempts int, backoff_base_ms bigint, backoff_max_ms bigint, timeout_ms bigint,
  expires_at_ms float8, window_ms bigint, async boolean,
  start_by_ms float8, catchup_after_ms float8, catchup boolean, host_limits json, verify_url text, releases_held boolean)
CROSS JOIN LATERAL (
  -- "Infinity" (a held occurrence) becomes 'infinity'; the division keeps whole milliseconds exact.
  SELECT coalesce(to_timestamp(r.due_at_ms / 1000), now() + make_interval(secs => coalesce(r.delay_ms, 0)::float8 / 1000)) AS due_at
) d;

-- name: InsertJobs
-- A batch with idempotency keys: a repeated key inserts nothing (the caller then reads the
-- first job).
-- use: _InsertJobRows
ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, due_at, scheduled_for, epoch, schema_version, slot, created_at;

-- name: InsertJobsUnkeyed
-- A batch without one idempotency key: nothing can conflict, and an INSERT with ON CONFLICT
-- inserts every row speculatively (a lock taken and released, a confirmation record in the
-- WAL, a row), key or no key: ~11 % of the statement's server CPU (bench/README.md, issue 15
-- part 22).
-- use: _InsertJobRows
RETURNING id, due_at, scheduled_for, epoch, schema_version, slot, created_at;

-- name: GetJob
SELECT * FROM jobs WHERE id = $1::uuid AND ($2::text IS NULL OR tenant = $2);

-- name: GetJobsByKeys
SELECT * FROM jobs WHERE tenant = $1 AND idempotency_key = ANY($2::text[]);

-- name: _JobListFilters
-- The filters every job listing shares (its job rows as `j`): status, schedule, due range.
  AND ($1::text IS NULL OR j.status = $1)
  AND ($2::text IS NULL OR j.schedule_id = $2)
  AND ($3::timestamptz IS NULL OR j.due_at < $3)
  AND ($4::timestamptz IS NULL OR j.due_at >= $4)

-- name: ListJobs
-- Every tenant's jobs (an admin's listing). Keyset pagination on id (UUIDv7, so creation
-- order). Bounded by $6.
SELECT j.* FROM jobs j
WHERE ($5::uuid IS NULL OR j.id > $5)
-- use: _JobListFilters
ORDER BY j.id
LIMIT $6;

-- name: ListJobsNewest
-- ListJobs newest first (the dashboard's recent jobs): the same filters, the keyset walks
-- down from the cursor. Bounded by $6.
SELECT j.* FROM jobs j
WHERE ($5::uuid IS NULL OR j.id < $5)
-- use: _JobListFilters
ORDER BY j.id DESC
LIMIT $6;

-- name: ListTenantJobs
-- ListJobs of one tenant ($7): its ids in order from job_tenants (028), each job by its
-- primary key. Bounded by $6.
SELECT j.* FROM job_tenants t JOIN jobs j ON j.id = t.id
WHERE t.tenant = $7 AND ($5::uuid IS NULL OR t.id > $5)
-- use: _JobListFilters
ORDER BY t.id
LIMIT $6;

-- name: ListTenantJobsNewest
-- ListTenantJobs newest first. Bounded by $6.
SELECT j.* FROM job_tenants t JOIN jobs j ON j.id = t.id
WHERE t.tenant = $7 AND ($5::uuid IS NULL OR t.id < $5)
-- use: _JobListFilters
ORDER BY t.id DESC
LIMIT $6;

-- name: ListAttempts
SELECT * FROM attempts WHERE job_id = $1::uuid ORDER BY number LIMIT 1000;

-- name: CancelJob
-- Scheduled or queued: cancelled at once. Running: flagged; its worker ends it cancelled.
UPDATE jobs SET
  status           = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,
  cancel_requested = cancel_requested OR status = 'running',
  version          = version + 1,
  lease_owner      = CASE WHEN status = 'running' THEN lease_owner END,
  lease_until      = CASE WHEN status = 'running' THEN lease_until END,
  finished_at      = CASE WHEN status = 'running' THEN NULL ELSE now() END,
  updated_at       = now()
WHERE id = $1::uuid AND ($2::text IS NULL OR tenant = $2)
  AND status IN ('scheduled', 'queued', 'running')
  AND ($3::int IS NULL OR version = $3)
RETURNING *;

-- name: NotifyCancel
-- Tells the worker running this job to abort its call now rather than at its next renewal.
SELECT pg_notify('scheduler_cancel', $1::text);

-- name: RescheduleJob
-- Back to scheduled at the new instant ($3, or $5 ms after the database's now()); the
-- version bump makes any dispatch in flight stale. The epoch (fencing token) stays: the
-- next claim stamps no lower (ClaimDue).
UPDATE jobs SET
  due_at = coalesce($3::timestamptz, now() + make_interval(secs => $5::float8 / 1000)),
  scheduled_for = coalesce($3::timestamptz, now() + make_interval(secs => $5::float8 / 1000)),
  status = 'scheduled', version = version + 1,
  lease_owner = NULL, lease_until = NULL, updated_at = now()
WHERE id = $1::uuid AND ($2::text IS NULL OR tenant = $2)
  AND status IN ('scheduled', 'queued')
  AND ($4::int IS NULL OR version = $4)
RETURNING *;

-- name: NotifyDue
-- Wakes dispatchers; the payload is the earliest due instant in epoch ms.
SELECT pg_notify('scheduler_due', $1::text);

-- name: InsertAudit
INSERT INTO audit_log (actor, tenant, action, object_id, reason, details)
VALUES ($1, $2, $3, $4, $5, $6::text::jsonb);

-- name: DbClock
-- The database's clock, for a process to plan its wake-ups (src/time/db-clock.ts).
SELECT clock_timestamp() AS now;

-- name: TransactionNow
-- now() of the caller's transaction: due instants computed in the process from the
-- database's clock (a schedule's first fire, a manual run's nominal time) use this.
SELECT now() AS now;
