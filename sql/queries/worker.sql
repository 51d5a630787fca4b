-- name: ClaimQueued
-- Takes queued jobs in dispatch order (then highest priority first), under a lease: owner +
-- a new generation. $5: the pre-staging horizon (ms): a job due that soon is taken and held
-- by the worker until its due instant (StartAttempts refuses it before then).
WITH c AS (
  SELECT id FROM jobs
  WHERE status = 'queued' AND due_at <= now() + make_interval(secs => $5::float8 / 1000) AND (expires_at IS NULL OR expires_at > now())
    AND claimable(start_by, calls)
    -- Workers outside the home region take nothing ($4: this worker's region).
    AND EXISTS (SELECT 1 FROM region_authority WHERE home_region = $4)
    -- $6: reserved slots serve only jobs of at least this priority (null: any).
    AND ($6::int IS NULL OR priority >= $6::int)
  ORDER BY queued_at, priority DESC, due_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'running', lease_owner = $1,
  lease_generation = j.lease_generation + 1,
  lease_until = now() + make_interval(secs => $3::float8 / 1000), updated_at = now()
FROM c WHERE j.id = c.id
-- Only the columns a call needs (CLAIMED_COLUMNS in src/store/types.ts, same order).
RETURNING j.id, j.tenant, j.status, j.due_at, j.scheduled_for, j.priority, j.version, j.calls,
  j.tries, j.idempotency_key, j.schedule_id, j.nominal_time, j.target, j.max_attempts,
  j.backoff_base_ms, j.backoff_max_ms, j.timeout_ms, j.expires_at, j.async, j.cancel_requested,
  j.throttle_until, j.epoch, j.queued_at, j.lease_generation, j.host_limits, j.verify_url,
  j.lease_key, j.checkpoint, j.slot, j.catchup, NULL::uuid AS attempt_id;

-- name: StartAttempts
-- The check right before calling: still ours (owner + generation), same version (no cancel
-- or reschedule since the claim), not flagged cancelled, due, and this worker's region ($5)
-- holds the authority at the generation the job was claimed under: a claim made before a
-- region failover is never called after it. Only jobs that pass get an attempt row and are
-- called.
-- The lease must also still be live, by at least the clock-skew margin ($7, ms): a worker that
-- stalled past its lease (GC, SIGSTOP) must not call a job the reaper may hand to another
-- worker. The check reads clock_timestamp(), not now(): this statement may have waited for
-- the row lock. The lease is extended here ($6, the TTL, ms), in the same row update that
-- opens the attempt, so the reaper (which locks the row before it looks for open attempts)
-- either sees the attempt or makes this update find the job no longer running.
WITH auth AS (
  SELECT generation FROM region_authority WHERE home_region = $5
), ok AS (
  UPDATE jobs j SET calls = j.calls + 1, updated_at = now(),
    lease_until = greatest(j.lease_until, clock_timestamp() + make_interval(secs => $6::float8 / 1000)),
    -- An occurrence whose first call starts past its grace is a catch-up run, and stays one.
    catchup = j.catchup OR (j.calls = 0 AND j.catchup_after IS NOT NULL AND now() > j.catchup_after)
  FROM auth
  -- The key list steers the planner to the primary key, and `status || ''` keeps it off the
  -- partial indexes on status: they hold a dead entry for every job that ran recently, which
  -- a statement of 100 jobs would walk by the thousand (see 016). Each row's generation and
  -- version are looked up by its position in the key list, not by a join with the unnested
  -- lists: estimated at one row, the jobs side drove a nested loop that rescanned the whole
  -- list for every job (16,256 rows filtered for 128 jobs: 5.7 ms; 52 ms for 512; by
  -- position 2.4 and 9 ms, measured with a generic plan as the driver runs it).
  WHERE j.id = ANY($2::uuid[]) AND j.status || '' = 'running' AND j.lease_owner = $1
    AND j.epoch >= auth.generation * 4294967296
    AND j.lease_generation = ($3::int[])[array_position($2::uuid[], j.id)]
    AND j.version = ($4::int[])[array_position($2::uuid[], j.id)]
    AND j.lease_until > clock_timestamp() + make_interval(secs => $7::float8 / 1000)
    AND NOT j.cancel_requested AND j.due_at <= now()
    AND (j.expires_at IS NULL OR j.expires_at > now())
    AND claimable(j.start_by, j.calls)
  RETURNING j.id, j.calls, j.lease_generation, j.epoch, j.catchup
), ins AS (
  INSERT INTO attempts (id, job_id, number, lease_generation, epoch, worker, started_at)
  -- $8: the attempts' ids, version 7 UUIDs made by the worker (027), each at its job's position.
  SELECT ($8::uuid[])[array_position($2::uuid[], ok.id)], ok.id, ok.calls, ok.lease_generation, ok.epoch, $1, now() FROM ok
  RETURNING id, job_id, number
)
-- The catch-up flag comes from the job row by primary key, computed as in `ok` from the
-- row as it was before this statement (what `j` sees here): joining the two CTEs instead
-- was a nested loop over both, quadratic in the batch (found by the herd bench).
SELECT ins.id AS attempt_id, ins.job_id, ins.number,
  (j.catchup OR (j.calls = 0 AND j.catchup_after IS NOT NULL AND now() > j.catchup_after)) AS catchup
FROM ins JOIN jobs j ON j.id = ins.job_id;

-- name: RenewLeases
-- Only a lease still live is extended: a lapsed one belongs to the reaper from then on, and a
-- worker that stalled past it (GC, SIGSTOP) must give the call up rather than revive it.
UPDATE jobs j SET lease_until = clock_timestamp() + make_interval(secs => $4::float8 / 1000)
-- By primary key only, each generation found by its position (see StartAttempts): a renewal
-- covers every job the worker holds, its prefetch included, so a quadratic join cost most here.
WHERE j.id = ANY($2::uuid[]) AND j.status || '' = 'running' AND j.lease_owner = $1
  AND j.lease_generation = ($3::int[])[array_position($2::uuid[], j.id)]
  AND j.lease_until > clock_timestamp()
RETURNING j.id, j.cancel_requested;

-- name: CompleteAttempts
-- Applies a batch of outcomes. The job row changes only under the same owner + generation:
-- a late completion after a reclaim changes nothing, with one exception (`overruled`). The
-- attempt row records what really happened on that call: as its outcome while it is open, as
-- its late outcome once the reaper recorded it lost.
WITH r AS (
  -- sig: how a job that dies here died (see 009_dlq.sql), for quarantine of poison jobs.
  -- Instants come as epoch milliseconds (completionsJson): cheaper to write and to read than text.
  -- A key left out is NULL (the writer omits nulls).
  SELECT r.*, CASE WHEN r.next_status = 'dead' THEN r.dead_reason || ':' || coalesce(r.http_status::text, r.outcome) END AS sig,
    to_timestamp(r.started_ms / 1000) AS started_at, to_timestamp(r.finished_ms / 1000) AS finished_at,
    to_timestamp(r.throttle_until_ms / 1000) AS throttle_until
  FROM json_to_recordset($2::text::json) AS r(
    job_id uuid, gen int, attempt_id uuid, outcome text, http_status int, error text,
    possibly_delivered boolean, started_ms float8, finished_ms float8,
    next_status text, next_delay_ms bigint, last_error text, counts_try boolean,
    throttle_until_ms float8, dead_reason text)
), locked AS (
  -- Lock order: the schedules of the batch's occurrences first, in key order. Each one that
  -- finishes fires the release trigger, which locks its schedule; left to the trigger, the
  -- locks are taken in job order, and two batches can each hold a schedule the other waits
  -- for (a deadlock). Taken here in one order, a batch waits at most for a whole other one.
  -- Only the occurrences whose finish runs the release (releases_held, 029): no other one
  -- takes its schedule's lock. One flagged after this read (its schedule just changed to
  -- queue) is updated only once that change committed, and its release then waits for no
  -- lock this batch holds.
  SELECT s.tenant, s.id FROM schedules s
  WHERE (s.tenant, s.id) IN (
    SELECT o.tenant, o.schedule_id FROM jobs o
    WHERE o.id = ANY(ARRAY(SELECT job_id FROM r)) AND o.schedule_id IS NOT NULL AND o.releases_held)
  ORDER BY s.tenant, s.id
  FOR NO KEY UPDATE
), j AS (
  UPDATE jobs j SET
    -- A cancel wins over a retry, not over a success: that call's effect happened.
    status = CASE WHEN j.cancel_requested AND r.next_status <> 'succeeded' THEN 'cancelled' ELSE r.next_status END,
    -- Retry delays count from the database's clock, the one eligibility is checked against.
    due_at = CASE WHEN r.next_delay_ms IS NULL THEN j.due_at
                  ELSE now() + make_interval(secs => r.next_delay_ms::float8 / 1000) END,
    tries = j.tries + CASE WHEN r.counts_try THEN 1 ELSE 0 END,
    throttle_until = coalesce(j.throttle_until, r.throttle_until),
    lease_owner = NULL, lease_until = NULL,
    last_error = r.last_error,
    dead_reason = CASE WHEN r.next_status = 'dead' THEN r.dead_reason ELSE j.dead_reason END,
    dead_signature = CASE WHEN r.sig IS NULL OR j.cancel_requested THEN j.dead_signature ELSE r.sig END,
    dead_streak = CASE WHEN r.sig IS NULL OR j.cancel_requested THEN j.dead_streak
                       WHEN j.dead_signature = r.sig THEN j.dead_streak + 1 ELSE 1 END,
    finished_at = CASE WHEN j.cancel_requested OR r.next_status <> 'scheduled' THEN now() END,
    updated_at = now()
  FROM r
  -- The key lists steer the planner to the primary keys: left to itself it starts from the
  -- status index, which is full of dead 'running' entries in a busy table.
  WHERE j.id = ANY(ARRAY(SELECT job_id FROM r)) AND j.id = r.job_id
    -- `|| ''`: by primary key only, never a walk of the partial indexes on status (see StartAttempts).
    AND j.status || '' = 'running' AND j.lease_owner = $1 AND j.lease_generation = r.gen
    -- Evaluated once, before the first row: every schedule lock is held before any job's.
    AND (SELECT count(*) FROM locked) >= 0
  RETURNING j.id, j.status, j.tenant, j.schedule_id
), gone AS (
  -- 410 Gone from a schedule's target: the endpoint is retired, stop generating for it.
  UPDATE schedules s SET paused = true, updated_at = now(), version = s.version + 1,
    paused_reason = 'the target answered 410 Gone at ' || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
  FROM j JOIN r ON r.job_id = j.id
  WHERE r.http_status = 410 AND j.schedule_id IS NOT NULL
    AND s.tenant = j.tenant AND s.id = j.schedule_id AND NOT s.paused
  RETURNING s.id
), a AS (
  UPDATE attempts a SET started_at = r.started_at, finished_at = r.finished_at,
    outcome = r.outcome, http_status = r.http_status, error = r.error,
    possibly_delivered = r.possibly_delivered
  FROM r WHERE a.id = ANY(ARRAY(SELECT attempt_id FROM r)) AND a.id = r.attempt_id
    AND a.outcome IS NULL
  RETURNING a.id
), late AS (
  -- The reaper recorded this call lost and decided the job on that verdict, which stays (a
  -- rewrite could show two successes for one job); the real outcome goes beside it, once.
  -- Only the attempts `a` did not find open (it runs first): nothing to look up when none was late.
  UPDATE attempts a SET late_outcome = r.outcome, late_http_status = r.http_status, late_at = now()
  FROM r WHERE a.id = ANY(ARRAY(SELECT attempt_id FROM r EXCEPT SELECT id FROM a)) AND a.id = r.attempt_id
    AND a.outcome = 'lost' AND a.late_outcome IS NULL
  RETURNING a.id, a.job_id, a.number, a.lease_generation
), overruled AS (
  -- A reap that used up the last try killed the job for a call that did succeed: the success
  -- stands. Only while the job is still dead of that very reap: not replayed since (status),
  -- not claimed since (generation), no call after this one (calls); `late` fires once.
  UPDATE jobs j SET status = 'succeeded', dead_reason = NULL, last_error = NULL,
    finished_at = now(), updated_at = now()
  FROM late JOIN r ON r.attempt_id = late.id
  WHERE j.id = late.job_id AND r.outcome = 'success'
    AND j.status = 'dead' AND j.dead_reason = 'lease_lost'
    AND j.lease_generation = late.lease_generation AND j.calls = late.number
  RETURNING j.id
)
SELECT j.id, j.status FROM j;

-- name: ReleaseJobs
-- Graceful stop or a discarded dispatch: give claimed-but-not-called jobs back at once.
UPDATE jobs j SET
  status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'scheduled' END,
  finished_at = CASE WHEN j.cancel_requested THEN now() END,
  lease_owner = NULL, lease_until = NULL, updated_at = now()
FROM unnest($2::uuid[], $3::int[]) AS x(id, gen)
WHERE j.id = x.id AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = x.gen
RETURNING j.id, j.status;

-- name: DeferJobs
-- Claimed but not called (its target host is at its rate or concurrency limit, slowed, or
-- paused by a Retry-After): back to scheduled $4 ms after the database's now() (never
-- earlier than it was due), without a call and without using up an attempt.
UPDATE jobs j SET
  status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'scheduled' END,
  finished_at = CASE WHEN j.cancel_requested THEN now() END,
  due_at = greatest(j.due_at, now() + make_interval(secs => x.delay_ms::float8 / 1000)),
  lease_owner = NULL, lease_until = NULL, updated_at = now()
FROM unnest($2::uuid[], $3::int[], $4::bigint[]) AS x(id, gen, delay_ms)
WHERE j.id = x.id AND j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = x.gen
RETURNING j.id, j.due_at;

-- name: NotifyDeferred
-- Wakes the dispatchers for jobs handed back: the payload is the earliest new due instant, in epoch ms.
SELECT pg_notify('scheduler_due', $1::text);

-- name: LockUncalled
-- Giving back jobs whose pre-call check (StartAttempts) failed or lost its reply, step 1 of 2
-- in one transaction: lock the rows still under this owner ($1) and generation. A
-- StartAttempts that is still committing (the client saw its connection drop, the server did
-- not) holds these rows: waiting for it here lets step 2, whose snapshot is taken after,
-- see the attempts it opened.
SELECT j.id FROM unnest($2::uuid[], $3::int[]) AS x(id, gen) JOIN jobs j ON j.id = x.id
WHERE j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = x.gen
FOR UPDATE OF j;

-- name: UnstartAtClaim
-- Jobs a claim started (ClaimDueIds) that the worker's host limiter will not let call now
-- (a host paused by Retry-After, or at a limit learned from its answers): their attempts
-- are taken back, as if never opened, and the jobs stay claimed under the same lease, to
-- wait in memory or be deferred like any claimed job, then checked by StartAttempts.
WITH x AS (
  SELECT * FROM unnest($2::uuid[], $3::int[], $4::uuid[]) AS x(id, gen, attempt_id)
), gone AS (
  DELETE FROM attempts a USING x
  WHERE a.id = x.attempt_id AND a.job_id = x.id AND a.lease_generation = x.gen AND a.worker = $1 AND a.outcome IS NULL
  RETURNING a.job_id
)
UPDATE jobs j SET calls = j.calls - 1, updated_at = now()
FROM gone WHERE j.id = gone.job_id AND j.status || '' = 'running' AND j.lease_owner = $1
RETURNING j.id;

-- name: LockStartedAtClaim
-- A claim that was also its jobs' pre-call check (ClaimDueIds) got no answer: it may have
-- committed and opened attempts nobody will call. Step 1 of 2, in one transaction: lock the
-- candidates ($2) now running under this worker ($1), waiting for a claim still committing.
SELECT j.id FROM jobs j
WHERE j.id = ANY($2::uuid[]) AND j.status || '' = 'running' AND j.lease_owner = $1
FOR UPDATE OF j;

-- name: LockRunClaim
-- Step 1 of 2 for a claim of a run (ClaimDueRun), which names no jobs before it answers: its
-- dispatch lease rows ($2: shards, held by $1), which it held FOR SHARE from before it locked
-- any job to its commit. Locked here, they are free only once that claim has ended.
SELECT l.name FROM leases l
WHERE l.name = ANY(ARRAY(SELECT 'dispatch:' || s FROM unnest($2::int[]) AS s)) AND l.owner = $1
ORDER BY l.name
FOR UPDATE OF l;

-- name: OpenedAtClaim
-- Step 2: the attempts that claim opened, by the ids it was given ($2): each one's job and
-- generation, for ReleaseUncalled. The snapshot is taken after step 1's locks.
SELECT a.job_id AS id, a.lease_generation AS gen FROM attempts a
WHERE a.id = ANY($2::uuid[]) AND a.worker = $1 AND a.outcome IS NULL;

-- name: ReleaseUncalled
-- Step 2: none of these jobs was called under this lease, whatever StartAttempts did. An
-- attempt it opened for that generation is deleted and its call taken back from `calls`, so
-- the job is as if never started: no try is counted (the reaper would have counted an open
-- attempt as a lost call), and its next call is attempt number `calls + 1` again. The job is
-- handed back due at its own instant, version unchanged; a cancel requested meanwhile ends it.
WITH x AS (
  SELECT * FROM unnest($2::uuid[], $3::int[]) AS x(id, gen)
), mine AS (
  SELECT j.id, x.gen FROM x JOIN jobs j ON j.id = x.id
  WHERE j.status = 'running' AND j.lease_owner = $1 AND j.lease_generation = x.gen
), gone AS (
  DELETE FROM attempts a USING mine
  WHERE a.job_id = mine.id AND a.lease_generation = mine.gen AND a.worker = $1 AND a.outcome IS NULL
  RETURNING a.job_id
)
UPDATE jobs j SET
  status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'scheduled' END,
  finished_at = CASE WHEN j.cancel_requested THEN now() END,
  calls = j.calls - (SELECT count(*) FROM gone WHERE gone.job_id = j.id)::int,
  lease_owner = NULL, lease_until = NULL, updated_at = now()
FROM mine WHERE j.id = mine.id
RETURNING j.id, j.status, j.due_at;
