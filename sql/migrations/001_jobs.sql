-- Jobs, their attempts, named leases and the audit log: the source of truth.
-- Status machine (one terminal transition per job, enforced by conditional UPDATEs):
--   scheduled ──dispatcher claim──▶ queued ──worker claim──▶ running ──▶ succeeded | dead | cancelled
--       ▲                              │                        │
--       └──── reaper (lease passed) ◀──┴── retry (backoff) ◀────┘
--   scheduled ──expires_at passed──▶ expired;  scheduled|queued ──cancel──▶ cancelled

CREATE TABLE jobs (
  id               uuid PRIMARY KEY,
  tenant           text        NOT NULL,
  status           text        NOT NULL CHECK (status IN
                     ('scheduled','queued','running','succeeded','dead','cancelled','expired')),
  -- due_at is when the job may next run (retries move it); scheduled_for is the due instant
  -- of the job itself (run_at or the last reschedule, plus its window jitter), which retries
  -- do not move: Scheduler-Scheduled-For and end-to-end lag.
  due_at           timestamptz NOT NULL,
  scheduled_for    timestamptz NOT NULL,
  priority         integer     NOT NULL DEFAULT 0,
  version          integer     NOT NULL DEFAULT 1,
  -- calls counts every call (Scheduler-Attempt); tries only those that use up max_attempts.
  calls            integer     NOT NULL DEFAULT 0,
  tries            integer     NOT NULL DEFAULT 0,
  idempotency_key  text,
  request_hash     text,
  schedule_id      text,
  nominal_time     timestamptz,
  target           jsonb       NOT NULL,
  max_attempts     integer     NOT NULL,
  backoff_base_ms  bigint      NOT NULL,
  backoff_max_ms   bigint      NOT NULL,
  timeout_ms       bigint      NOT NULL,
  expires_at       timestamptz,
  window_ms        bigint      NOT NULL DEFAULT 0,
  async            boolean     NOT NULL DEFAULT false,
  cancel_requested boolean     NOT NULL DEFAULT false,
  -- Throttled calls are retried until this instant (expires_at, else first throttle + 24 h).
  throttle_until   timestamptz,
  epoch            bigint,
  queued_at        timestamptz,
  lease_owner      text,
  lease_generation integer     NOT NULL DEFAULT 0,
  lease_until      timestamptz,
  last_error       text,
  dead_reason      text,
  finished_at      timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Creation idempotency: a repeat of the same key in a tenant finds the first job.
CREATE UNIQUE INDEX jobs_tenant_idempotency_key ON jobs (tenant, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- Due discovery and queue claims walk this index in due order.
CREATE INDEX jobs_status_due_at ON jobs (status, due_at);
-- Lease recovery only looks at in-flight rows.
CREATE INDEX jobs_lease_until ON jobs (lease_until) WHERE status IN ('queued','running');
-- Listing per tenant in id (= creation time, UUIDv7) order.
CREATE INDEX jobs_tenant_id ON jobs (tenant, id);
CREATE INDEX jobs_schedule_id ON jobs (schedule_id, nominal_time) WHERE schedule_id IS NOT NULL;

CREATE TABLE attempts (
  id                 uuid PRIMARY KEY,
  job_id             uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  number             integer     NOT NULL,
  lease_generation   integer     NOT NULL,
  epoch              bigint,
  worker             text        NOT NULL,
  started_at         timestamptz NOT NULL,
  finished_at        timestamptz,
  -- null while the call is in flight; 'lost' when the reaper found its worker gone.
  outcome            text,
  http_status        integer,
  error              text,
  possibly_delivered boolean     NOT NULL DEFAULT false,
  UNIQUE (job_id, number)
);

CREATE TABLE leases (
  name        text PRIMARY KEY,
  owner       text,
  -- Rises on every change of holder: the fencing token of the holder.
  epoch       bigint      NOT NULL DEFAULT 0,
  lease_until timestamptz NOT NULL DEFAULT '-infinity'
);

CREATE TABLE audit_log (
  id        bigserial PRIMARY KEY,
  at        timestamptz NOT NULL DEFAULT now(),
  actor     text        NOT NULL,
  tenant    text,
  action    text        NOT NULL,
  object_id text,
  reason    text,
  details   jsonb
);

-- Workers take queued jobs highest priority first.
CREATE INDEX jobs_queued_priority ON jobs (priority DESC, due_at) WHERE status = 'queued';
CREATE INDEX attempts_job_id ON attempts (job_id, number);
-- Expiry walks only the jobs that have a deadline.
CREATE INDEX jobs_expires_at ON jobs (expires_at) WHERE status IN ('scheduled', 'queued') AND expires_at IS NOT NULL;
