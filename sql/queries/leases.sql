-- name: AcquireLease
-- Takes a free or expired lease (expired for longer than the clock-skew margin) and bumps
-- the epoch: the new holder's fencing token is higher than every earlier one. $5: only while
-- this region holds the region authority (null: any region).
INSERT INTO leases (name, owner, epoch, lease_until)
SELECT $1, $2, 1, now() + make_interval(secs => $3::float8 / 1000)
WHERE $5::text IS NULL OR EXISTS (SELECT 1 FROM region_authority WHERE home_region = $5::text)
ON CONFLICT (name) DO UPDATE SET
  owner = excluded.owner, epoch = leases.epoch + 1, lease_until = excluded.lease_until
WHERE leases.owner IS NULL
   OR leases.lease_until < now() - make_interval(secs => $4::float8 / 1000)
RETURNING epoch, lease_until;

-- name: RenewLease
-- Only the owner with the same epoch renews: any takeover bumped the epoch. $5: only while
-- this region holds the region authority (null: any region).
UPDATE leases SET lease_until = now() + make_interval(secs => $4::float8 / 1000)
WHERE name = $1 AND owner = $2 AND epoch = $3
  AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM region_authority WHERE home_region = $5::text))
RETURNING lease_until;

-- name: ReleaseLease
UPDATE leases SET owner = NULL, lease_until = '-infinity'
WHERE name = $1 AND owner = $2 AND epoch = $3
RETURNING name;

-- name: GetLease
SELECT name, owner, epoch, lease_until FROM leases WHERE name = $1;

-- name: NotifyLeaseReleased
SELECT pg_notify('scheduler_lease', $1::text);

-- name: SessionIdleTimeout
-- The idle_in_transaction_session_timeout this session runs under, in ms (0: none): what
-- openDb asked for at start-up, unless a pooler left it out.
SELECT setting::bigint AS ms FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout';
