-- Per-target-host limits given with a job or a schedule: { "rate": calls per second,
-- "concurrency": calls in flight } (either may be absent). Workers pace calls to each host by
-- the tightest limit among the jobs to it they hold, else by SCHEDULER_HOST_RATE and
-- SCHEDULER_HOST_CONCURRENCY. Occurrences copy their schedule's. NULL: no override.
ALTER TABLE jobs ADD COLUMN host_limits jsonb
  CHECK (host_limits IS NULL OR jsonb_typeof(host_limits) = 'object');
ALTER TABLE schedules ADD COLUMN host_limits jsonb
  CHECK (host_limits IS NULL OR jsonb_typeof(host_limits) = 'object');
