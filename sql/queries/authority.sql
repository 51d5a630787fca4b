-- Region authority (migration 005).

-- name: AuthoritySeed
-- The first process seeds the row with its HOME_REGION, its lease a TTL ($2 ms) ahead;
-- later ones change nothing.
INSERT INTO region_authority (home_region, lease_until) VALUES ($1, now() + make_interval(secs => $2::float8 / 1000))
ON CONFLICT (id) DO NOTHING;

-- name: AuthorityGet
-- leader: the coordinator (lease 'dispatch'); leader_term: the highest epoch of a shard held
-- now, the fencing term claims are stamped with (the coordinator's own while it holds its
-- lease and no shard is held; 0 when nobody holds anything: epochs are never reset).
SELECT a.home_region, a.generation, a.holder, a.lease_until, a.changed_at, now() AS db_now,
  l.owner AS leader,
  coalesce((SELECT max(s.epoch) FROM leases s WHERE s.name LIKE 'dispatch:%' AND s.owner IS NOT NULL AND s.lease_until > now()),
    CASE WHEN l.owner IS NOT NULL AND l.lease_until > now() THEN l.epoch END, 0) AS leader_term,
  l.lease_until AS leader_until
FROM region_authority a LEFT JOIN leases l ON l.name = 'dispatch';

-- name: AuthorityRenew
-- The home region's dispatch leader extends the authority lease; nothing when the row names
-- another region or generation (a failover happened).
UPDATE region_authority SET holder = $3, lease_until = now() + make_interval(secs => $4::float8 / 1000)
WHERE home_region = $1 AND generation = $2
RETURNING lease_until;

-- name: AuthorityLock
SELECT home_region, generation, holder, lease_until, now() AS db_now FROM region_authority FOR UPDATE;

-- name: AuthorityMove
-- The fenced move: new home, generation + 1, a fresh lease for the new home to pick up.
UPDATE region_authority SET home_region = $1, generation = generation + 1, holder = NULL,
  lease_until = now() + make_interval(secs => $2::float8 / 1000), changed_at = now()
RETURNING home_region, generation, lease_until;

-- name: AuthorityResetDispatchLease
-- A new generation frees every dispatch lease: the old leader's and the old shard holders'
-- renewals fail at once, and the old home's dispatchers no longer count as members (the new
-- home's take every shard at once). The epochs stay: the next holders' come from the
-- never-reset dispatch_term sequence, above every term of this generation or an earlier one,
-- so a process that keeps an epoch across a round trip (A → B → A) never outranks a fresh one.
WITH members AS (DELETE FROM leases WHERE name LIKE 'dispatcher:%')
UPDATE leases SET owner = NULL, lease_until = '-infinity' WHERE name = 'dispatch' OR name LIKE 'dispatch:%';

-- name: AuthorityRequeue
-- Jobs queued by the old home's dispatcher carry its old token: back to scheduled, for the
-- new home to claim with a new one. (Queued jobs are few: the dispatcher caps the queue.)
UPDATE jobs SET status = 'scheduled', lease_owner = NULL, lease_until = NULL, updated_at = now()
WHERE status = 'queued'
RETURNING id;

-- name: NotifyAuthority
SELECT pg_notify('scheduler_authority', $1::text);

-- name: DatabaseReadOnly
SELECT pg_is_in_recovery() AS standby;

-- name: RegionPresence
-- A dispatcher process says it is alive in region $2 (owner $1) for $3 ms, in any region,
-- home or standby: a manual move to a region with no live dispatcher needs force. Rows of
-- processes gone for an hour are swept on the way.
WITH swept AS (DELETE FROM leases WHERE name LIKE 'presence:%' AND lease_until < now() - interval '1 hour')
INSERT INTO leases (name, owner, epoch, lease_until, acquired_at)
VALUES ('presence:' || $2 || ':' || $1, $1, 0, now() + make_interval(secs => $3::float8 / 1000), now())
ON CONFLICT (name) DO UPDATE SET lease_until = excluded.lease_until;

-- name: RegionPresenceLeave
DELETE FROM leases WHERE name = 'presence:' || $2 || ':' || $1;

-- name: RegionLiveDispatchers
-- Region names are [a-z0-9-]: no LIKE wildcards in $1.
SELECT count(*) AS n FROM leases WHERE name LIKE 'presence:' || $1 || ':%' AND lease_until > now();
