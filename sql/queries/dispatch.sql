-- name: ClaimDue
-- Fenced claim: takes jobs only of the shards whose lease rows still name this owner and
-- epoch, checked in the same statement, so a paused owner whose shards moved claims nothing.
-- With a worker owner ($7) the jobs go straight to running under that worker's lease (a
-- worker in the dispatcher's own process: one statement instead of two); without, to
-- queued for any worker. $8: how late a job must be (ms): 0 normally; the reconciliation pass
-- behind the Redis index asks only for jobs the index should already have handed out.
WITH lease AS (
  -- The shards ($2) this owner ($1) holds at these epochs ($3), each checked on its lease
  -- row. FOR SHARE: a release or a region failover (an UPDATE of either row) waits for this
  -- claim to commit, and a takeover skips the row meanwhile (ShardAcquire), so the check
  -- holds until the end of the statement, not only at its snapshot. $9/$10: this region must hold the authority, at this generation. The
  -- authority row is locked first (rows are locked in the order of OF): a failover locks it,
  -- then frees the lease rows; taking them the other way round deadlocked with it.
  SELECT x.shard FROM unnest($2::int[], $3::bigint[]) AS x(shard, epoch)
  JOIN leases l ON l.name = 'dispatch:' || x.shard AND l.owner = $1 AND l.epoch = x.epoch AND l.lease_until > now()
  JOIN region_authority a ON a.home_region = $9 AND a.generation = $10
  FOR SHARE OF a, l
), due AS (
  -- A job is in shard slot × shards ($11) / 4096: contiguous ranges of its id's slot.
  SELECT id FROM jobs
  WHERE status = 'scheduled' AND due_at <= now() - make_interval(secs => $8::float8 / 1000)
    AND (expires_at IS NULL OR expires_at > now())
    AND claimable(start_by, calls)
    AND (slot * $11::int / 4096) = ANY(ARRAY(SELECT shard FROM lease))
  ORDER BY due_at
  LIMIT $4
  FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET
  status = CASE WHEN $7::text IS NULL THEN 'queued' ELSE 'running' END,
  -- Never below the token the job already carries (an earlier claim's, kept through
  -- retries, reschedules and replays): a target keeping the highest token per job never
  -- refuses a legitimate call, whichever holder of whichever shard claims it next.
  epoch = greatest(j.epoch, $5::bigint), queued_at = now(), lease_owner = $7::text,
  lease_generation = j.lease_generation + CASE WHEN $7::text IS NULL THEN 0 ELSE 1 END,
  lease_until = now() + make_interval(secs => $6::float8 / 1000), updated_at = now()
FROM due WHERE j.id = due.id
-- Only the columns a call needs (CLAIMED_COLUMNS in src/store/types.ts, same order).
RETURNING j.id, j.tenant, j.status, j.due_at, j.scheduled_for, j.priority, j.version, j.calls,
  j.tries, j.idempotency_key, j.schedule_id, j.nominal_time, j.target, j.max_attempts,
  j.backoff_base_ms, j.backoff_max_ms, j.timeout_ms, j.expires_at, j.async, j.cancel_requested,
  j.throttle_until, j.epoch, j.queued_at, j.lease_generation, j.host_limits, j.verify_url,
  j.lease_key, j.checkpoint, j.slot, j.catchup, NULL::uuid AS attempt_id;

-- name: ClaimDueIds
-- ClaimDue restricted to candidates from the Redis index ($8: job ids). The index is never
-- trusted: every condition of ClaimDue is checked again here, on the rows themselves, so a
-- stale entry (cancelled, rescheduled, claimed, unknown) claims nothing.
-- For a worker in this process ($7), the claim is also the pre-call check of up to $13 of
-- the jobs (the call slots it has free now), in due order: their attempts are opened here
-- ($14: attempt ids, the n-th job started gets the n-th), as StartAttempts would open them, and
-- they are called as soon as the claim answers: one statement, one round trip and one row
-- version fewer per job. What StartAttempts checks holds here by construction: the lease
-- is this statement's own (owner, a new generation, a fresh lease_until), the version is
-- the row's as locked, the region authority is checked at this generation in `lease`. Only
-- jobs that go to their call at once are started: due now, no per-job host limits (the
-- worker's limiter decides those), no cancel requested, and no verify-before-retry pending
-- (a verify URL and an earlier call: the worker asks the target first).
-- use: _FencedLease
, due AS (
  -- Driven by the ids (the primary key): a filter on id = ANY(...) beside an index on status let the
  -- planner walk the due range of a whole herd for every claim, and a join to the unnest of
  -- the ids rescanned the list once per job.
  -- $12: the pre-staging horizon (ms): jobs due that soon are claimed already; the worker
  -- that gets one holds it until its due instant (and StartAttempts checks it again).
  -- `status || ''`: never the partial index of scheduled jobs either, whose due range is the
  -- whole herd (a BitmapAnd with it read ~50k entries per claim of 100).
  SELECT j.id, j.due_at,
    j.due_at <= now() AND j.host_limits IS NULL AND NOT j.cancel_requested
      AND (j.verify_url IS NULL OR j.calls = 0) AS startable
  FROM jobs j
  WHERE j.id = ANY($8::uuid[]) AND j.status || '' = 'scheduled' AND j.due_at <= now() + make_interval(secs => $12::float8 / 1000)
    AND (j.expires_at IS NULL OR j.expires_at > now())
    AND claimable(j.start_by, j.calls)
    AND (j.slot * $11::int / 4096) = ANY(ARRAY(SELECT shard FROM lease))
  ORDER BY j.due_at
  LIMIT $4
  FOR UPDATE OF j SKIP LOCKED
-- use: _ClaimAndStart

-- name: ClaimDueRun
-- ClaimDueIds without a discovery before it (DueClaimer's run): the oldest due jobs of one
-- tenant ($8) and priority sign ($15), catch-up runs and replays left out (the planner
-- rates those), straight from jobs_scheduled_tenant_class_id in its order. Every other
-- condition, the fence and the start at the claim ($13, $14: the n-th job started gets the
-- n-th attempt id) are ClaimDueIds's.
-- use: _FencedLease
, due AS (
  SELECT j.id, j.due_at,
    j.due_at <= now() AND j.host_limits IS NULL AND NOT j.cancel_requested
      AND (j.verify_url IS NULL OR j.calls = 0) AS startable
  FROM jobs j
  WHERE j.status = 'scheduled' AND j.tenant = $8 AND sign(j.priority) = $15::int
    AND j.due_at <= now() + make_interval(secs => $12::float8 / 1000)
    AND NOT ((j.catchup_after IS NOT NULL AND now() > j.catchup_after AND j.calls = 0) OR j.replay)
    AND (j.expires_at IS NULL OR j.expires_at > now())
    AND claimable(j.start_by, j.calls)
    AND (j.slot * $11::int / 4096) = ANY(ARRAY(SELECT shard FROM lease))
  ORDER BY j.due_at
  LIMIT $4
  FOR UPDATE OF j SKIP LOCKED
-- use: _ClaimAndStart

-- name: _FencedLease
-- The start of ClaimDueIds and ClaimDueRun: the shards ($2) this owner ($1) holds at these
-- epochs ($3), the authority at this generation ($9, $10), as in ClaimDue.
WITH lease AS (
  SELECT x.shard FROM unnest($2::int[], $3::bigint[]) AS x(shard, epoch)
  JOIN leases l ON l.name = 'dispatch:' || x.shard AND l.owner = $1 AND l.epoch = x.epoch AND l.lease_until > now()
  JOIN region_authority a ON a.home_region = $9 AND a.generation = $10
  FOR SHARE OF a, l
)

-- name: _ClaimAndStart
-- The end of ClaimDueIds and ClaimDueRun, after their `due` (id, due_at, startable; locked):
-- which of those rows start here, their claim and their start.
), pick AS (
  -- The first $13 startable jobs in due order (a window function may not share the locking
  -- SELECT): go, started here; k, its attempt id's index in $14 (the n-th started gets the n-th).
  SELECT id, n AS k, startable AND $7::text IS NOT NULL AND n <= $13::int AS go FROM (
    SELECT id, startable, count(*) FILTER (WHERE startable) OVER (ORDER BY due_at, id ROWS UNBOUNDED PRECEDING) AS n
    FROM due) d
), c AS (
  UPDATE jobs j SET
    status = CASE WHEN $7::text IS NULL THEN 'queued' ELSE 'running' END,
    -- Never below the token the job already carries (an earlier claim's, kept through
    -- retries, reschedules and replays): a target keeping the highest token per job never
    -- refuses a legitimate call, whichever holder of whichever shard claims it next.
    epoch = greatest(j.epoch, $5::bigint), queued_at = now(), lease_owner = $7::text,
    lease_generation = j.lease_generation + CASE WHEN $7::text IS NULL THEN 0 ELSE 1 END,
    lease_until = now() + make_interval(secs => $6::float8 / 1000), updated_at = now(),
    -- Started here: as StartAttempts does.
    calls = j.calls + CASE WHEN pick.go THEN 1 ELSE 0 END,
    catchup = j.catchup OR (pick.go AND j.calls = 0 AND j.catchup_after IS NOT NULL AND now() > j.catchup_after)
  FROM pick WHERE j.id = pick.id
  -- Only the columns a call needs (CLAIMED_COLUMNS in src/store/types.ts, same order).
  RETURNING j.id, j.tenant, j.status, j.due_at, j.scheduled_for, j.priority, j.version, j.calls,
    j.tries, j.idempotency_key, j.schedule_id, j.nominal_time, j.target, j.max_attempts,
    j.backoff_base_ms, j.backoff_max_ms, j.timeout_ms, j.expires_at, j.async, j.cancel_requested,
    j.throttle_until, j.epoch, j.queued_at, j.lease_generation, j.host_limits, j.verify_url,
    j.lease_key, j.checkpoint, j.slot, j.catchup,
    CASE WHEN pick.go THEN ($14::uuid[])[pick.k] END AS attempt_id
), ins AS (
  INSERT INTO attempts (id, job_id, number, lease_generation, epoch, worker, started_at)
  SELECT c.attempt_id, c.id, c.calls, c.lease_generation, c.epoch, $7, now()
  FROM c WHERE c.attempt_id IS NOT NULL
)
SELECT * FROM c;

-- name: ExpireDue
-- Jobs not started by expires_at never run (waiting for their time, a retry or a worker).
WITH x AS (
  SELECT id FROM jobs
  WHERE status IN ('scheduled', 'queued') AND expires_at IS NOT NULL AND expires_at <= now()
  ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'expired', finished_at = now(), updated_at = now(),
  lease_owner = NULL, lease_until = NULL,
  last_error = coalesce(j.last_error, 'expired: not started before expires_at')
FROM x WHERE j.id = x.id
RETURNING j.id;

-- name: ExpireMisfired
-- Occurrences not started by their start_by (misfire grace, or the catch-up window) never
-- run: the misfire policy said so when they were created. A held occurrence (overlap=queue,
-- due_at 'infinity') is never expired here: waiting behind a running predecessor is not a
-- misfire; its release moves start_by to the release instant + its grace.
-- Lock order: an occurrence's schedule before the occurrence. Expiring one fires the release
-- trigger, which locks its schedule; taken after the job, that lock waits for a generator
-- that holds the schedule (DueSchedules) while it expires this very job (ExpireCoalesced),
-- a deadlock. So the schedules are locked first, and one busy elsewhere is skipped with its
-- occurrences, as a locked job is: this statement never waits, and a later pass gets them.
WITH c AS (
  SELECT id, tenant, schedule_id FROM jobs
  WHERE status IN ('scheduled', 'queued') AND start_by IS NOT NULL AND start_by <= now() AND calls = 0
    AND due_at <> 'infinity'
  ORDER BY start_by LIMIT $1
), s AS (
  SELECT s.tenant, s.id FROM schedules s
  WHERE (s.tenant, s.id) IN (SELECT tenant, schedule_id FROM c WHERE schedule_id IS NOT NULL)
  ORDER BY s.tenant, s.id
  FOR NO KEY UPDATE SKIP LOCKED
), x AS (
  SELECT j.id FROM jobs j
  -- A key list: the planner goes straight to the primary key.
  WHERE j.id = ANY(ARRAY(SELECT id FROM c))
    AND (j.schedule_id IS NULL OR (j.tenant, j.schedule_id) IN (SELECT tenant, id FROM s))
    AND j.status IN ('scheduled', 'queued') AND j.start_by <= now() AND j.calls = 0
    AND j.due_at <> 'infinity'
  FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'expired', finished_at = now(), updated_at = now(),
  lease_owner = NULL, lease_until = NULL, dead_reason = 'misfire',
  last_error = 'misfire: not started in time for its nominal time (misfire policy)'
FROM x WHERE j.id = x.id
RETURNING j.id, j.tenant, j.schedule_id;

-- name: CountQueued
-- How many jobs wait for a worker, counted up to a cap (bounded, on the partial index).
SELECT count(*) AS n FROM (SELECT 1 FROM jobs WHERE status = 'queued' LIMIT $1) q;

-- name: CountQueuedAtLeast
-- Queued jobs of at least priority $2 (the reserved class), up to a cap: on
-- jobs_queued_priority, which is in priority order.
SELECT count(*) AS n FROM (SELECT 1 FROM jobs WHERE status = 'queued' AND priority >= $2 LIMIT $1) q;

-- name: NextDueAt
-- For the dispatcher's idle wait: among the first $3 scheduled jobs in due order, the earliest
-- due instant of those in the shards $1 (of $2; null: all of them, and $3 is then 1), how many
-- were read and the last one's instant. None in those shards among a full read: this
-- dispatcher's next job falls due no earlier than that last instant. Before, it read the first
-- job of any shard, and one due in a shard it does not hold (its holder dead or behind) made it
-- pass again every 5 ms, a claim and this statement each time, until that job was claimed.
-- $4 (null: from the first): jobs due from then on only, its second look when the first read
-- only other shards' overdue jobs. $4 is when its claim began: its own due before then the
-- claim took, unless locked; one due since is read here.
SELECT min(due_at) FILTER (WHERE $1::int[] IS NULL OR (slot * $2::int / 4096) = ANY($1::int[])) AS mine,
  max(due_at) AS read_to, count(*)::int AS read
FROM (SELECT due_at, slot FROM jobs
      WHERE status = 'scheduled' AND due_at >= coalesce($4::timestamptz, '-infinity') AND due_at < 'infinity'
      ORDER BY due_at LIMIT $3) s;

-- name: NotifyQueued
SELECT pg_notify('scheduler_queued', $1::text);

-- name: LockExpiredLeases
-- The reaper's first statement (one transaction with ReapLockedLeases): queued or running rows
-- whose lease passed (plus the clock-skew margin), locked. Only what the lock makes certain is
-- decided here; whether a call is open is read by the next statement, with a snapshot taken
-- after the locks: a StartAttempts that committed between this statement's snapshot and its
-- lock (its attempt invisible here) is then seen, and one still waiting for the lock finds
-- the job no longer running.
-- On jobs_in_flight (016): every in-flight job is looked at, a bounded set (what workers
-- hold and the short queue), so lease updates need no index of their own.
SELECT j.id FROM jobs j
WHERE j.status IN ('queued', 'running')
  AND j.lease_until < now() - make_interval(secs => $2::float8 / 1000)
ORDER BY j.lease_until LIMIT $1 FOR UPDATE SKIP LOCKED;

-- name: ReapLockedLeases
-- The rows LockExpiredLeases locked ($1) go back to scheduled. A call that was in flight (an
-- open attempt) is recorded as lost and counts as a try; a job claimed but never called costs
-- nothing. An accepted async job whose target stopped heartbeating is the same case (its
-- attempt stays open until the target reports).
WITH r AS (
  SELECT j.id, j.status,
    EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = j.id AND a.outcome IS NULL) AS in_call
  FROM jobs j
  WHERE j.id = ANY($1::uuid[]) AND j.status IN ('queued', 'running')
), u AS (
  UPDATE jobs j SET
    status = CASE
      WHEN j.cancel_requested THEN 'cancelled'
      WHEN r.in_call AND j.tries + 1 >= j.max_attempts THEN 'dead'
      ELSE 'scheduled' END,
    tries = j.tries + CASE WHEN r.in_call THEN 1 ELSE 0 END,
    lease_owner = NULL, lease_until = NULL, deadline_at = NULL, updated_at = now(),
    finished_at = CASE WHEN j.cancel_requested OR (r.in_call AND j.tries + 1 >= j.max_attempts) THEN now() END,
    dead_reason = CASE WHEN NOT j.cancel_requested AND r.in_call AND j.tries + 1 >= j.max_attempts THEN 'lease_lost' ELSE j.dead_reason END,
    -- The signature of a death here (see 009_dlq.sql): its attempt is recorded 'lost'.
    dead_signature = CASE WHEN NOT j.cancel_requested AND r.in_call AND j.tries + 1 >= j.max_attempts THEN 'lease_lost:lost' ELSE j.dead_signature END,
    dead_streak = CASE WHEN j.cancel_requested OR NOT r.in_call OR j.tries + 1 < j.max_attempts THEN j.dead_streak
                       WHEN j.dead_signature = 'lease_lost:lost' THEN j.dead_streak + 1 ELSE 1 END,
    last_error = CASE WHEN r.in_call
      THEN 'lease expired during a call: the worker stopped renewing (crash, kill or pause)' ELSE j.last_error END
  FROM r WHERE j.id = r.id
  RETURNING j.id, r.status AS was, r.in_call, j.status AS now_status
), a AS (
  UPDATE attempts a SET outcome = 'lost', finished_at = now(), possibly_delivered = true,
    error = 'the worker lost its lease before reporting an outcome'
  FROM u WHERE a.job_id = u.id AND u.in_call AND a.outcome IS NULL
  RETURNING a.job_id
)
SELECT u.id, u.was, u.in_call, u.now_status FROM u;

-- name: SampleDue
-- Discovery in one statement (one round trip a claim pass, not two): a sample of $2 tenants
-- with scheduled jobs, in name order after the cursor $1 and wrapping round to the first
-- names when fewer follow it, and for each sampled tenant and priority class up to
-- least($4, greatest(16, ceil($3 / tenants sampled))) of its oldest jobs that a claim would
-- take now (or within the pre-staging horizon $5, ms), in the shards $6 (of $7; null: all
-- of them). Each row also says how many tenants were sampled and the last of them (the
-- next pass's cursor when the sample was full); with no candidate at all, one row of those
-- two alone. $8: jobs left out (those a claim in flight is taking, when the next pass's
-- discovery runs beside it; see DueClaimer.lookAhead).
-- Candidates only: the claim checks everything again.
--
-- The tenant sample is a loose index scan, one probe per tenant however many jobs each has.
-- Each probe is ordered by the whole key of jobs_scheduled_tenant_class_id, which only that
-- index gives without a sort: ordered by tenant alone, the planner could take jobs_tenant_id
-- (every job of the tenant, in any status) and filter out the finished ones, thousands a
-- probe in a busy table. The wrap-around scan runs only when the first falls short.
WITH RECURSIVE after_cursor AS (
  (SELECT tenant FROM jobs WHERE status = 'scheduled' AND tenant > $1
   ORDER BY tenant, sign(priority), due_at, id LIMIT 1)
  UNION ALL
  SELECT (SELECT j.tenant FROM jobs j WHERE j.status = 'scheduled' AND j.tenant > a.tenant
          ORDER BY j.tenant, sign(j.priority), j.due_at, j.id LIMIT 1)
  FROM after_cursor a WHERE a.tenant IS NOT NULL
), from_start AS (
  (SELECT tenant FROM jobs WHERE status = 'scheduled' AND tenant > ''
   ORDER BY tenant, sign(priority), due_at, id LIMIT 1)
  UNION ALL
  SELECT (SELECT j.tenant FROM jobs j WHERE j.status = 'scheduled' AND j.tenant > a.tenant
          ORDER BY j.tenant, sign(j.priority), j.due_at, j.id LIMIT 1)
  FROM from_start a WHERE a.tenant IS NOT NULL
), first AS MATERIALIZED (
  SELECT tenant FROM after_cursor WHERE tenant IS NOT NULL LIMIT $2
), wrapped AS MATERIALIZED (
  SELECT tenant FROM from_start
  WHERE tenant IS NOT NULL AND $1 <> '' AND (SELECT count(*) FROM first) < $2
  LIMIT greatest(0, $2 - (SELECT count(*) FROM first))
), sampled AS MATERIALIZED (
  -- A tenant in both (fewer tenants than the sample) keeps its place in the first part.
  SELECT DISTINCT ON (tenant) tenant, part FROM (
    SELECT tenant, 1 AS part FROM first UNION ALL SELECT tenant, 2 AS part FROM wrapped
  ) x ORDER BY tenant, part
), summary AS (
  SELECT count(*)::int AS sampled,
    (SELECT tenant FROM sampled ORDER BY part DESC, tenant DESC LIMIT 1) AS last_tenant,
    least($4::int, greatest(16, ceil($3::float8 / greatest(count(*), 1))))::int AS per_class
  FROM sampled
)
SELECT s.sampled, s.last_tenant, c.id, c.tenant, c.priority, c.due_at, c.catchup
FROM summary s LEFT JOIN LATERAL (
  SELECT c.id, c.tenant, c.priority, c.due_at, c.catchup FROM sampled t
  CROSS JOIN (VALUES (1), (0), (-1)) AS k(cls)
  CROSS JOIN LATERAL (
    SELECT id, tenant, priority, due_at,
      -- Dead-letter replays count as catch-up traffic too (one class lower).
      ((catchup_after IS NOT NULL AND now() > catchup_after AND calls = 0) OR replay) AS catchup
    FROM jobs
    WHERE status = 'scheduled' AND tenant = t.tenant AND sign(priority) = k.cls
      AND due_at <= now() + make_interval(secs => $5::float8 / 1000)
      -- The held shards, $6, or null when they are all of them (one dispatcher, the usual
      -- case): the test then folds away when the statement is planned with its values, as
      -- postgres.js's first five runs on a connection are. Counted at 0.5 % (an expression
      -- without statistics), it made the planner expect 1 row and sort every due job of the
      -- tenant and class instead of taking the ordered scan that stops at the limit
      -- (test/store/candidate-scan.test.ts).
      AND ($6::int[] IS NULL OR (slot * $7::int / 4096) = ANY($6::int[]))
      AND (expires_at IS NULL OR expires_at > now())
      AND claimable(start_by, calls)
      -- A hashed subplan, built once: `NOT (id = ANY($8))` walked the whole list for every row
      -- read (a generic plan does not hash a parameter's array), and the rows a discovery
      -- ahead reads first are the very ones the claim beside it is taking.
      AND id NOT IN (SELECT unnest($8::uuid[]))
    ORDER BY due_at
    LIMIT s.per_class
  ) c
) c ON true;

-- name: CandidatesByIds
-- The same facts for candidates named by the Redis index ($1), those a claim would take now
-- (or within the pre-staging horizon $2, ms).
SELECT id, tenant, priority, due_at,
  ((catchup_after IS NOT NULL AND now() > catchup_after AND calls = 0) OR replay) AS catchup
FROM jobs
WHERE id = ANY($1::uuid[]) AND status = 'scheduled' AND due_at <= now() + make_interval(secs => $2::float8 / 1000)
  AND (slot * $4::int / 4096) = ANY($3::int[])
  AND (expires_at IS NULL OR expires_at > now())
  AND claimable(start_by, calls);

-- name: TenantsInFlight
-- Jobs queued or running per tenant of $1 (bounded by what workers hold).
SELECT tenant, count(*) AS n FROM jobs
WHERE status IN ('queued', 'running') AND tenant = ANY($1::text[])
GROUP BY tenant;
