-- Shard leases for sharded dispatch: rows 'dispatch:<n>' in `leases`, and one membership
-- row 'dispatcher:<owner>' per live dispatcher (its share is shards / live dispatchers).

-- name: ShardJoin
-- A dispatcher's membership: inserted or extended ($3 ms); only while this region ($4) holds
-- the region authority.
INSERT INTO leases (name, owner, epoch, lease_until, acquired_at)
SELECT 'dispatcher:' || $1, $1, 0, now() + make_interval(secs => $2::float8 / 1000), now()
WHERE EXISTS (SELECT 1 FROM region_authority WHERE home_region = $3)
ON CONFLICT (name) DO UPDATE SET lease_until = excluded.lease_until, owner = excluded.owner
RETURNING lease_until;

-- name: ShardLeave
DELETE FROM leases WHERE name = 'dispatcher:' || $1;

-- name: ShardState
-- Every shard of $1 with its holder (null: never held), whether it may be taken now (free, or
-- expired for longer than the skew margin $2 ms), and how many dispatchers are live.
SELECT s.shard, l.owner, l.epoch, l.lease_until, l.acquired_at,
  (l.name IS NULL OR l.owner IS NULL OR l.lease_until < now() - make_interval(secs => $2::float8 / 1000)) AS free,
  (SELECT count(*) FROM leases m WHERE m.name LIKE 'dispatcher:%' AND m.lease_until > now()) AS live
FROM generate_series(0, $1::int - 1) AS s(shard)
LEFT JOIN leases l ON l.name = 'dispatch:' || s.shard
ORDER BY s.shard;

-- name: ShardAcquire
-- Takes the shards $2 that are still free (or expired beyond the skew margin $4 ms) for owner
-- $1. Each new epoch comes from the dispatch_term sequence (015_fencing_terms.sql): taken
-- atomically, never reset, so it is above every epoch handed out before, in this generation
-- or an earlier one, and no two acquisitions share one, however they interleave. A shard's
-- fencing token rises at every handoff and a new owner's tokens are above every old owner's.
-- Only while this region ($5) holds the region authority.
-- A lease row still locked (SKIP LOCKED) is left for a later pass: its old holder's claim or
-- generation pass is still open, and the takeover must come after it anyway. Waiting for it
-- here stalled this dispatcher's whole ownership loop, its own renewals with it, for as long
-- as a paused holder stayed paused (issue 15, session 30).
WITH lapsed AS (
  SELECT l.name FROM leases l
  WHERE l.name = ANY(ARRAY(SELECT 'dispatch:' || s FROM unnest($2::int[]) AS s))
    AND (l.owner IS NULL OR l.lease_until < now() - make_interval(secs => $4::float8 / 1000))
    AND EXISTS (SELECT 1 FROM region_authority WHERE home_region = $5)
  ORDER BY l.name
  FOR UPDATE OF l SKIP LOCKED
), taken AS (
  UPDATE leases l SET owner = $1, epoch = nextval('dispatch_term'),
    lease_until = now() + make_interval(secs => $3::float8 / 1000), acquired_at = now()
  FROM lapsed WHERE l.name = lapsed.name
  RETURNING l.name, l.epoch, l.lease_until
), made AS (
  -- Shards never held before: no row to lock; a racing insert of the same row loses quietly.
  -- In shard order: an insert that meets another's uncommitted insert of the same row waits
  -- for it, and two dispatchers inserting in their own shuffled orders waited on each other
  -- (3 then 5 against 5 then 3) until PostgreSQL ended one as a deadlock, after a second
  -- (test/races/shard-acquire-order.test.ts).
  INSERT INTO leases (name, owner, epoch, lease_until, acquired_at)
  SELECT 'dispatch:' || s, $1, nextval('dispatch_term'), now() + make_interval(secs => $3::float8 / 1000), now()
  FROM unnest($2::int[]) AS s
  WHERE EXISTS (SELECT 1 FROM region_authority WHERE home_region = $5)
    AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.name = 'dispatch:' || s)
  ORDER BY s
  ON CONFLICT (name) DO NOTHING
  RETURNING name, epoch, lease_until
)
SELECT * FROM taken UNION ALL SELECT * FROM made;

-- name: ShardRenew
-- Extends the shards this owner still holds at these epochs; the others are lost (taken
-- after a lapse, or this region is no longer home).
UPDATE leases l SET lease_until = now() + make_interval(secs => $4::float8 / 1000)
FROM unnest($2::int[], $3::bigint[]) AS x(shard, epoch)
WHERE l.name = 'dispatch:' || x.shard AND l.owner = $1 AND l.epoch = x.epoch
  AND EXISTS (SELECT 1 FROM region_authority WHERE home_region = $5)
RETURNING x.shard, l.lease_until;

-- name: ShardRelease
-- Gives shards back (a graceful stop, or more than a fair share). The UPDATE waits for a
-- claim of ours in flight on the row (FOR SHARE), so the next owner starts after it.
UPDATE leases l SET owner = NULL, lease_until = '-infinity'
FROM unnest($2::int[], $3::bigint[]) AS x(shard, epoch)
WHERE l.name = 'dispatch:' || x.shard AND l.owner = $1 AND l.epoch = x.epoch
RETURNING x.shard;

-- name: NotifyShardsReleased
SELECT pg_notify('scheduler_shards', $1::text);

-- name: LockShards
-- Fencing for occurrence generation: the shards of $2/$3 this owner still holds, locked
-- shared for the transaction (a release waits for it; a takeover skips the row until then). $4/$5: this region holds the
-- authority at this generation. The authority row first, as a failover locks it (ClaimDue).
SELECT x.shard FROM unnest($2::int[], $3::bigint[]) AS x(shard, epoch)
JOIN leases l ON l.name = 'dispatch:' || x.shard AND l.owner = $1 AND l.epoch = x.epoch AND l.lease_until > now()
JOIN region_authority a ON a.home_region = $4 AND a.generation = $5
FOR SHARE OF a, l;
