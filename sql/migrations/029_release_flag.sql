-- The release of a held occurrence (overlap=queue, 002) runs only for the occurrences that can
-- have one waiting behind them. The row trigger fired for every occurrence of every schedule
-- as it finished: three statements a job (the schedule's lock, "anything else in progress?",
-- "anything held?"), ~20 µs of the database's CPU, a sixth of an occurrence's delivery
-- (bench/README.md, issue 15 part 23). CompleteAttempts' lock of the schedule, which orders
-- those of the trigger, now covers flagged occurrences only, too. Only overlap=queue holds occurrences back, so only an
-- occurrence that was in progress under that policy needs it.
--
-- releases_held is true for:
--   - every occurrence the generator makes of an overlap=queue schedule, held or not, and
--     every manual run of a schedule (SQL: InsertJobs; src/store/new-job.ts);
--   - a schedule's occurrences in progress when it is changed to overlap=queue, in the
--     transaction that changes it (FlagReleasingOccurrences), under the schedule's lock the
--     generator also takes, and waiting on each job's row lock: a job that finishes meanwhile
--     either commits first (it is not in progress, nothing is held behind it) or sees the flag;
--   - a replayed occurrence (ReplayJobs), whatever its schedule's policy now.
-- A flag that is true where it need not be costs the old price, never a missed release.
-- A schedule changed from queue to allow releases its held occurrences at once
-- (ReleaseAllHeld): its new occurrences do not run the release, and under allow the generator
-- does not look for held ones. Under skip it does (ReleaseOldestHeld), and makes no new
-- occurrence while one is held or in progress.
ALTER TABLE jobs ADD COLUMN releases_held boolean NOT NULL DEFAULT false;

-- Whatever is in progress now keeps the release it had.
UPDATE jobs SET releases_held = true
WHERE schedule_id IS NOT NULL AND status IN ('scheduled', 'queued', 'running');

-- Held occurrences of schedules already changed to allow: due now, as ReleaseAllHeld does.
UPDATE jobs j SET due_at = now(), updated_at = now(), scheduled_for = now(),
  start_by = now() + (j.start_by - j.scheduled_for),
  catchup_after = now() + (j.catchup_after - j.scheduled_for)
FROM schedules s
WHERE s.tenant = j.tenant AND s.id = j.schedule_id AND s.overlap = 'allow'
  AND j.status = 'scheduled' AND j.due_at = 'infinity';

DROP TRIGGER jobs_release_held_occurrence ON jobs;
CREATE TRIGGER jobs_release_held_occurrence
  AFTER UPDATE OF status ON jobs
  FOR EACH ROW
  WHEN (NEW.releases_held
        AND NEW.schedule_id IS NOT NULL
        AND OLD.status IN ('scheduled', 'queued', 'running')
        AND NEW.status IN ('succeeded', 'dead', 'cancelled', 'expired'))
  EXECUTE FUNCTION release_held_occurrence();
