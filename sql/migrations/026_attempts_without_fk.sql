-- The attempt log without a foreign key to jobs. The key's check ran once per attempt opened
-- by the pre-call check (a row lock probe of the job through SPI: ~6 µs a job, a third of the
-- check's server time once the check itself was fixed; bench/README.md "cost ladder"). It
-- guarded nothing the check does not: an attempt is only inserted by StartAttempts, for a
-- job row the same statement has just updated (and so locked), and only finished jobs are
-- ever deleted. The cascade it gave is now the pruner's own step (PruneFinishedJobs deletes
-- the attempts of the jobs it deletes, in the same statement).
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_job_id_fkey;
