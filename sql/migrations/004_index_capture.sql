-- Capture of index changes. Every write that changes what the due index should hold (a job
-- created, rescheduled, retried, handed back by the reaper, released from hold, cancelled or
-- expired) appends an index_outbox row in its own transaction. A trigger does it rather than
-- each write path, so no path can forget: the API, the worker's retries, the reaper, the
-- held-occurrence release and anything added later all go through it.
--
-- Claims (scheduled -> queued/running) are not captured: the dispatcher that claimed the
-- jobs removes them from the index itself, and a removal it misses is a stale entry that the
-- dispatcher's SQL validation drops.
--
-- Capture runs only while index_state.enabled: the dispatch leader turns it on when it keeps
-- a Redis index and off when it dispatches from SQL alone, so a deployment without Redis
-- never fills the outbox.
CREATE TABLE index_state (
  id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
  enabled    boolean     NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO index_state DEFAULT VALUES;

CREATE FUNCTION capture_index_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT (SELECT enabled FROM index_state) THEN
    RETURN NULL;
  END IF;
  INSERT INTO index_outbox (job_id, due_at)
  VALUES (NEW.id, CASE WHEN NEW.status = 'scheduled' AND NEW.due_at < 'infinity' THEN NEW.due_at END);
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_index_capture_insert
  AFTER INSERT ON jobs
  FOR EACH ROW
  WHEN (NEW.status = 'scheduled' AND NEW.due_at < 'infinity')
  EXECUTE FUNCTION capture_index_change();

-- Indexable: status 'scheduled' and a finite due_at. Fires when a row becomes indexable or
-- moves while indexable (upsert), or stops being indexable other than by a claim (remove).
CREATE TRIGGER jobs_index_capture_update
  AFTER UPDATE OF status, due_at ON jobs
  FOR EACH ROW
  WHEN (
    (NEW.status = 'scheduled' AND NEW.due_at < 'infinity'
      AND (OLD.status <> 'scheduled' OR OLD.due_at IS DISTINCT FROM NEW.due_at))
    OR (OLD.status = 'scheduled' AND OLD.due_at < 'infinity'
      AND NOT (NEW.status = 'scheduled' AND NEW.due_at < 'infinity')
      AND NEW.status NOT IN ('queued', 'running'))
  )
  EXECUTE FUNCTION capture_index_change();
