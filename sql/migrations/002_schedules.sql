-- Recurring schedules: templates that generate one job per nominal fire time.

CREATE TABLE schedules (
  tenant            text        NOT NULL,
  id                text        NOT NULL,
  cron              text        NOT NULL,
  timezone          text        NOT NULL,
  dst_gap           text        CHECK (dst_gap IN ('shift', 'skip')),
  dst_fold          text        CHECK (dst_fold IN ('first', 'last', 'both')),
  target            jsonb       NOT NULL,
  priority          integer     NOT NULL DEFAULT 0,
  max_attempts      integer     NOT NULL,
  backoff_base_ms   bigint      NOT NULL,
  backoff_max_ms    bigint      NOT NULL,
  timeout_ms        bigint      NOT NULL,
  misfire           text        NOT NULL CHECK (misfire IN ('skip', 'fire_once', 'fire_all')),
  -- null: min(60 s, half the gap to the next occurrence)
  misfire_grace_ms  bigint,
  catchup_window_ms bigint      NOT NULL,
  overlap           text        NOT NULL CHECK (overlap IN ('allow', 'skip', 'queue')),
  max_queued        integer     NOT NULL DEFAULT 1,
  window_ms         bigint      NOT NULL DEFAULT 0,
  paused            boolean     NOT NULL DEFAULT false,
  paused_reason     text,
  start_at          timestamptz,
  end_at            timestamptz,
  -- The next nominal fire instant not yet generated; null when the rule has ended.
  next_fire_at      timestamptz,
  last_nominal_at   timestamptz,
  occurrences_generated bigint  NOT NULL DEFAULT 0,
  occurrences_skipped   bigint  NOT NULL DEFAULT 0,
  occurrences_misfired  bigint  NOT NULL DEFAULT 0,
  last_skip_at      timestamptz,
  last_skip_reason  text,
  version           integer     NOT NULL DEFAULT 1,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, id)
);

-- The generator takes schedules whose next fire time has come.
CREATE INDEX schedules_next_fire_at ON schedules (next_fire_at)
  WHERE NOT paused AND next_fire_at IS NOT NULL;

-- Occurrence jobs. A missed occurrence must start by start_by (misfire grace, or the catch-up
-- window), checked only before its first call; a start after catchup_after carries
-- Scheduler-Catchup: true.
ALTER TABLE jobs ADD COLUMN start_by timestamptz;
ALTER TABLE jobs ADD COLUMN catchup_after timestamptz;
ALTER TABLE jobs ADD COLUMN catchup boolean NOT NULL DEFAULT false;

-- One job per (schedule, nominal time): the occurrence's identity.
CREATE UNIQUE INDEX jobs_occurrence ON jobs (tenant, schedule_id, nominal_time)
  WHERE schedule_id IS NOT NULL AND nominal_time IS NOT NULL;
-- Overlap decisions look only at a schedule's unfinished occurrences.
CREATE INDEX jobs_schedule_active ON jobs (tenant, schedule_id)
  WHERE schedule_id IS NOT NULL AND status IN ('scheduled', 'queued', 'running');
CREATE INDEX jobs_start_by ON jobs (start_by)
  WHERE status IN ('scheduled', 'queued') AND start_by IS NOT NULL;

-- overlap = queue: an occurrence that must wait for the one before it is held with
-- due_at = 'infinity'. When an occurrence of the schedule finishes, the oldest held one is
-- released (due now) if nothing else of that schedule is still in progress. A trigger, so
-- every way a job can finish (worker, reaper, cancel, expiry) releases it.
CREATE FUNCTION release_held_occurrence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  next_id uuid;
BEGIN
  -- Serialise with other finishers of this schedule and with the generator (which holds
  -- this row while it decides): each later statement here sees what they committed, so two
  -- occurrences finishing at once cannot both leave the held one waiting.
  PERFORM 1 FROM schedules WHERE tenant = NEW.tenant AND id = NEW.schedule_id FOR NO KEY UPDATE;
  IF EXISTS (
    SELECT 1 FROM jobs
    WHERE tenant = NEW.tenant AND schedule_id = NEW.schedule_id
      AND status IN ('scheduled', 'queued', 'running') AND due_at <> 'infinity'
  ) THEN
    RETURN NULL;
  END IF;
  SELECT id INTO next_id FROM jobs
  WHERE tenant = NEW.tenant AND schedule_id = NEW.schedule_id
    AND status = 'scheduled' AND due_at = 'infinity'
  ORDER BY nominal_time
  LIMIT 1
  FOR UPDATE SKIP LOCKED;
  IF next_id IS NOT NULL THEN
    -- Waiting for the previous occurrence is not a miss: its grace and start-by count from
    -- its release.
    UPDATE jobs SET due_at = now(), updated_at = now(), scheduled_for = now(),
      start_by = now() + (start_by - scheduled_for),
      catchup_after = now() + (catchup_after - scheduled_for)
    WHERE id = next_id;
    PERFORM pg_notify('scheduler_due', (extract(epoch FROM now()) * 1000)::bigint::text);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_release_held_occurrence
  AFTER UPDATE OF status ON jobs
  FOR EACH ROW
  WHEN (NEW.schedule_id IS NOT NULL
        AND OLD.status IN ('scheduled', 'queued', 'running')
        AND NEW.status IN ('succeeded', 'dead', 'cancelled', 'expired'))
  EXECUTE FUNCTION release_held_occurrence();
