-- Index capture of created jobs (004_index_capture.sql) once per INSERT statement instead of
-- once per row. The per-row trigger ran a PL/pgSQL call and a read of index_state for every
-- job, enabled or not: about a fifth of the database's work in a 1000-job batch create
-- (bench/README.md, "creation"). Same rows captured, in the same transaction.
DROP TRIGGER jobs_index_capture_insert ON jobs;

CREATE FUNCTION capture_index_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT (SELECT enabled FROM index_state) THEN
    RETURN NULL;
  END IF;
  INSERT INTO index_outbox (job_id, due_at)
  SELECT id, due_at FROM inserted_jobs WHERE status = 'scheduled' AND due_at < 'infinity';
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_index_capture_inserts
  AFTER INSERT ON jobs
  REFERENCING NEW TABLE AS inserted_jobs
  FOR EACH STATEMENT
  EXECUTE FUNCTION capture_index_inserts();
