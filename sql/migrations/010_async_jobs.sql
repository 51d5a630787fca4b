-- Async (long-running) jobs: the target answers 2xx to accept, then renews a lease with
-- heartbeats and reports the outcome itself (POST /v1/jobs/:id/heartbeat, /complete).
--
-- lease_key: a per-job secret (gen_random_uuid draws from the server's strong random source).
--   The lease token handed to the target is HMAC-SHA256(lease_key, "<job id>.<generation>"),
--   so it names one attempt's generation and cannot be made from the job id. A column
--   default and not an INSERT column: every insert path (API, batch, schedule occurrences)
--   gets one without listing it. Added without a default first, then the default set: the
--   rows already there need none (async jobs were refused until now) and the table is not
--   rewritten.
-- checkpoint: the target's last progress marker (JSON text, bounded by the API), sent back
--   to the next attempt in Scheduler-Checkpoint.
-- deadline_at: the execution ceiling of the running async attempt (its start + timeout),
--   set when the target accepts, cleared when the attempt ends. Heartbeats do not move it.
ALTER TABLE jobs ADD COLUMN lease_key uuid;
ALTER TABLE jobs ALTER COLUMN lease_key SET DEFAULT gen_random_uuid();
ALTER TABLE jobs ADD COLUMN checkpoint text;
ALTER TABLE jobs ADD COLUMN deadline_at timestamptz;

-- Schedules: their occurrences are async jobs when the schedule says so.
ALTER TABLE schedules ADD COLUMN async boolean NOT NULL DEFAULT false;

-- The reaper's execution-ceiling sweep looks only at running attempts that have one.
CREATE INDEX jobs_deadline_at ON jobs (deadline_at) WHERE status = 'running' AND deadline_at IS NOT NULL;
