-- Audit log reads and batch writes (one row per audited change; InsertAudit in jobs.sql
-- writes one).

-- name: InsertAuditBatch
INSERT INTO audit_log (actor, tenant, action, object_id, reason, details)
SELECT r.actor, r.tenant, r.action, r.object_id, r.reason, r.details
FROM jsonb_to_recordset($1::text::jsonb) AS r(actor text, tenant text, action text, object_id text, reason text, details jsonb);

-- name: ListAuditInTenant
-- Newest first, keyset on id ($2: the last id seen), bounded by $5; optional filters: $3
-- action prefix, $4 object id.
SELECT * FROM audit_log
WHERE tenant = $1
  AND ($2::bigint IS NULL OR id < $2)
  AND ($3::text IS NULL OR starts_with(action, $3))
  AND ($4::text IS NULL OR object_id = $4)
ORDER BY id DESC
LIMIT $5;

-- name: ListAuditAll
-- ListAuditInTenant across tenants (a "*" token without a tenant filter), on the primary key.
SELECT * FROM audit_log
WHERE ($1::bigint IS NULL OR id < $1)
  AND ($2::text IS NULL OR starts_with(action, $2))
  AND ($3::text IS NULL OR object_id = $3)
ORDER BY id DESC
LIMIT $4;
