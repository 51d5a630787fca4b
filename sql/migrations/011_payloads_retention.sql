-- Large target bodies, stored once and referenced by content hash; retention of finished jobs.

-- A body over SCHEDULER_PAYLOAD_INLINE_MAX lives here, once per content; jobs and schedules
-- carry target.body_ref = hash (and body_size) instead of the bytes. Rows never change
-- content: the key is the SHA-256 of the body. used_at is touched by every new reference, so
-- retention removes only payloads that no job or schedule has referenced for its grace.
CREATE TABLE payloads (
  hash       text        PRIMARY KEY,   -- 'sha256:<64 hex>'
  size       integer     NOT NULL,
  body       bytea       NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  used_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payloads_used_at ON payloads (used_at);

-- "Is this payload still referenced?" without a scan: only rows that hold a reference.
CREATE INDEX jobs_body_ref ON jobs ((target->>'body_ref')) WHERE (target->>'body_ref') IS NOT NULL;
CREATE INDEX schedules_body_ref ON schedules ((target->>'body_ref')) WHERE (target->>'body_ref') IS NOT NULL;

-- Retention walks finished jobs of one status, oldest first, in bounded batches.
CREATE INDEX jobs_finished ON jobs (status, finished_at)
  WHERE status IN ('succeeded', 'cancelled', 'expired', 'dead');

-- Audit retention (off by default) walks the log by time.
CREATE INDEX audit_log_at ON audit_log (at);
