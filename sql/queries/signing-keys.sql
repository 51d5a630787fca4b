-- Signing keys per tenant and schedule (migration 022). Secrets cross the driver as hex text
-- (the same on postgres.js and PGlite); the API reads them back never, workers only through
-- LiveSigningKeys.

-- name: InsertSigningKey
INSERT INTO signing_keys (id, tenant, schedule_id, secret, replaces)
VALUES ($1, $2, $3, decode($4, 'hex'), $5)
RETURNING id, tenant, schedule_id, created_at, retired_at, replaces, now() AS now;

-- name: CountLiveSigningKeys
-- Keys of one scope ($1 tenant, $2 schedule or null: the tenant's own) not yet retired.
SELECT count(*) AS n FROM signing_keys
WHERE tenant = $1 AND schedule_id IS NOT DISTINCT FROM $2 AND (retired_at IS NULL OR retired_at > now());

-- name: GetSigningKeyForUpdate
-- $2: the caller's tenant, or null for a "*" token.
SELECT id, tenant, schedule_id, created_at, retired_at, replaces, now() AS now FROM signing_keys
WHERE id = $1 AND ($2::text IS NULL OR tenant = $2)
FOR UPDATE;

-- name: ListSigningKeys
-- Newest first, without secrets. $1 tenant (null: all), $2 schedule id (null: any), $3
-- 'active' | 'retired' | null (both), $4 limit.
SELECT id, tenant, schedule_id, created_at, retired_at, replaces, now() AS now FROM signing_keys
WHERE ($1::text IS NULL OR tenant = $1)
  AND ($2::text IS NULL OR schedule_id = $2)
  AND ($3::text IS NULL
    OR ($3 = 'active' AND (retired_at IS NULL OR retired_at > now()))
    OR ($3 = 'retired' AND retired_at <= now()))
ORDER BY created_at DESC, id DESC
LIMIT $4;

-- name: RetireSigningKeyAt
-- Retires key $1 at $2 (seconds from now, 0: now), unless it retires sooner already.
UPDATE signing_keys SET retired_at = LEAST(coalesce(retired_at, 'infinity'), now() + make_interval(secs => $2::float8))
WHERE id = $1
RETURNING id, tenant, schedule_id, created_at, retired_at, replaces, now() AS now;

-- name: LiveSigningKeys
-- Every key a call may still be signed with: what each worker holds in memory.
SELECT id, tenant, schedule_id, encode(secret, 'hex') AS secret_hex, retired_at, created_at
FROM signing_keys
WHERE retired_at IS NULL OR retired_at > now()
ORDER BY created_at, id;

-- name: NotifySigningKeys
-- Workers reload their keys (worker/signing-keyring.ts); sent in the changing transaction.
SELECT pg_notify('scheduler_signing_keys', '');

-- name: RetireScheduleSigningKeys
-- A deleted schedule's keys retire with it: a new schedule of the same id starts without them.
UPDATE signing_keys SET retired_at = now()
WHERE tenant = $1 AND schedule_id = $2 AND (retired_at IS NULL OR retired_at > now())
RETURNING id;
