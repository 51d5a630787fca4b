-- Dead letters: listing, replay, quarantine of poison jobs.
--
-- A dead job keeps its id across replays. Its history stays linked: attempts rows (a replay's
-- calls get new attempt ids, Scheduler-Attempt keeps counting), the audit log (who replayed
-- it, when, why), and these columns:
--   schema_version  the shape of the stored job (target, retry fields) this version of the
--                   code understands; a job written by a newer or retired shape is not
--                   replayable (the replay would re-send what no handler may still accept).
--   replays         how many times the job was taken out of the dead-letter queue.
--   dead_signature  how it died last: "<dead_reason>:<http_status>", or
--                   "<dead_reason>:<attempt outcome>" when no HTTP answer came (transient,
--                   unknown, lost), e.g. "permanent:400", "max_attempts:unknown".
--   dead_streak     consecutive deaths with that same signature (1 for a first death). A job
--                   whose streak exceeds SCHEDULER_DLQ_QUARANTINE_AFTER (it died the same way
--                   after that many replays) is quarantined: replay needs "force".
--   replay          this run is a replay: the dispatch planner counts it one priority class
--                   lower, like catch-up traffic. Unlike jobs.catchup it does not send
--                   Scheduler-Catchup (that header means "late by misfire policy").
ALTER TABLE jobs ADD COLUMN schema_version integer NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN replays integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN dead_signature text;
ALTER TABLE jobs ADD COLUMN dead_streak integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN replay boolean NOT NULL DEFAULT false;

-- The dead-letter queue in death order (finished_at is the dead_at of a dead job), per
-- tenant and across tenants; keyset pagination walks these.
CREATE INDEX jobs_dead_tenant ON jobs (tenant, finished_at, id) WHERE status = 'dead';
CREATE INDEX jobs_dead ON jobs (finished_at, id) WHERE status = 'dead';

-- The audit log newest first, per tenant (the primary key serves the all-tenants view).
CREATE INDEX audit_log_tenant_id ON audit_log (tenant, id);

-- Bulk replays are spread at most rate_per_sec apart. The next free instant is kept here,
-- not in memory, so a restart (or another API process) keeps the pace, and two bulk
-- replays queue one after the other instead of doubling the rate.
CREATE TABLE dlq_replay_pace (
  id      boolean     PRIMARY KEY DEFAULT true CHECK (id),
  next_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO dlq_replay_pace DEFAULT VALUES;
