-- The SQL due-time index: the jobs table itself, walked on jobs_scheduled_due (016).
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

-- The index outbox (migration 003): written in a job's transaction, relayed to Redis.

-- name: OutboxAppend
-- One row per element of $1 (job ids) and $2 (due instants as text; null: remove).
INSERT INTO index_outbox (job_id, due_at)
SELECT x.job_id, x.due_at::timestamptz
FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS x(job_id, due_at, n)
ORDER BY x.n;

-- name: OutboxRelayLock
-- One relay pass at a time, in whichever process, held to the end of the pass's transaction:
-- an old coordinator's relay that has not noticed the takeover yet and the new one's never
-- interleave, so rows reach the index in id order. A pass is one Redis round trip.
SELECT true AS locked FROM pg_advisory_xact_lock(hashtext('scheduler:index-outbox-relay'));

-- name: OutboxRelayFence
-- Whether this relay's process still holds the coordinator lease ($1) as owner $2 at epoch $3.
-- Its own statement, after OutboxRelayLock: a statement's snapshot is taken when it starts, and
-- one taken before the wait for the lock could miss a takeover committed meanwhile.
SELECT 1 AS held FROM leases
WHERE name = $1 AND owner = $2 AND epoch = $3 AND lease_until > clock_timestamp();

-- name: OutboxTake
-- The oldest $1 rows, in id order. Passes are serialized (OutboxRelayLock), so nothing is
-- skipped: a relay that skipped rows another one held could apply a newer row for a job
-- before an older one, and the older would win.
SELECT id, job_id, due_at FROM index_outbox
ORDER BY id
LIMIT $1;

-- name: OutboxPending
-- Whether any row waits, outside a transaction: an idle relay's pass is this one statement
-- instead of a transaction of four (lock, fence, lag, take). A row committed just after it
-- waits for the next pass, as one committed just after OutboxTake's snapshot does.
SELECT EXISTS (SELECT 1 FROM index_outbox) AS pending;

-- name: OutboxDelete
DELETE FROM index_outbox WHERE id = ANY($1::bigint[]);

-- name: OutboxLag
-- Seconds since the oldest row not yet relayed was written; 0 when the outbox is empty.
-- The lowest id is the oldest row (near enough: ids are taken at insert): one index probe,
-- not a scan of an outbox that grew during a Redis outage.
SELECT coalesce((SELECT extract(epoch FROM now() - created_at) FROM index_outbox ORDER BY id LIMIT 1), 0)::float8 AS lag;

-- name: IndexWindowLoad
-- Scheduled jobs due in [$1, $2) (epoch ms; $1 null: from the beginning), held occurrences excluded, in (due_at, id)
-- order; keyset-paginated: $3/$4 are the last (due_us, id) seen, null on the first page.
-- The cursor is in microseconds (due_at's own precision) so a page never repeats itself.
SELECT id, due_at, (extract(epoch FROM due_at) * 1000000)::bigint AS due_us FROM jobs
WHERE status = 'scheduled'
  AND ($1::bigint IS NULL OR due_at >= timestamptz 'epoch' + $1::bigint * interval '1 millisecond')
  AND due_at <  timestamptz 'epoch' + $2::bigint * interval '1 millisecond'
  AND due_at < 'infinity'
  AND ($3::bigint IS NULL
       OR (due_at, id) > (timestamptz 'epoch' + $3::bigint * interval '1 microsecond', $4::uuid))
ORDER BY due_at, id
LIMIT $5;

-- Capture of index changes into the outbox (migration 004), switched by the dispatch leader.

-- name: IndexCaptureLockTimeout
-- Turning capture on waits at most this long for job writers in flight (and holds new ones up
-- meanwhile); past it the switch fails and the keeper tries again on its next pass.
SELECT set_config('lock_timeout', '1000ms', true) AS lock_timeout;

-- name: IndexCaptureLockWriters
-- Turning capture on, in the switch's transaction, before IndexCaptureSet: SHARE conflicts
-- with the ROW EXCLUSIVE lock every INSERT and UPDATE of jobs holds to the end of its
-- transaction, so this waits for every job writer in flight and holds new ones until the
-- switch commits (src/index/capture.ts says why that closes the gap).
LOCK TABLE jobs IN SHARE MODE;

-- name: IndexCaptureSet
-- Returns a row only when the setting changed.
UPDATE index_state SET enabled = $1, updated_at = now()
WHERE enabled IS DISTINCT FROM $1
RETURNING enabled;

-- name: OutboxDiscard
-- Drops up to $1 of the oldest rows (capture was turned off: nobody will relay them).
DELETE FROM index_outbox WHERE id IN (SELECT id FROM index_outbox ORDER BY id LIMIT $1)
RETURNING id;

-- name: IndexCaptureGet
SELECT enabled FROM index_state;

-- name: IndexValidate
-- The current state of index candidates the claim did not take: is the entry stale?
SELECT id, status, due_at FROM jobs WHERE id = ANY($1::uuid[]);
