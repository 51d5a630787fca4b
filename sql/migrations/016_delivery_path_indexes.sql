-- The delivery path pays per index entry (issue 15). Every status change of a job is a
-- non-HOT update, which adds an entry to every index whose predicate the new row satisfies.
--
-- jobs_status_due_at held every job in every status: each claim, pre-call check and
-- completion added an entry to it, and dead entries of finished jobs piled up in the ranges
-- the hot statements walked ('running', 'queued'). Due discovery only ever asks for
-- scheduled jobs (ClaimDue, NextDueAt, the SQL due index, the gauges), so the index now
-- holds those only: a job leaves it when it is claimed and never comes back once finished.
--
-- Every index a claim walks ends in the job id: its keys are then unique. Equal keys (a herd
-- of 50,000 jobs due at one instant, a claim's batch queued at one instant) are stored as one
-- posting list, whose entries a scan cannot mark dead one by one, so each claim went through
-- every job claimed before it in the heap: the herd drained ever slower (50k: ~1,000/s).
CREATE INDEX jobs_scheduled_due ON jobs (due_at, id) WHERE status = 'scheduled';
DROP INDEX jobs_status_due_at;
CREATE INDEX jobs_scheduled_tenant_class_id ON jobs (tenant, sign(priority), due_at, id) WHERE status = 'scheduled';
DROP INDEX jobs_scheduled_tenant_class;
CREATE INDEX jobs_queued_order_id ON jobs (queued_at, priority DESC, due_at, id) WHERE status = 'queued';
DROP INDEX jobs_queued_order;

-- Same columns as the index of UNIQUE (job_id, number): a second entry per attempt for nothing.
DROP INDEX attempts_job_id;

-- The pre-call check and lease renewals change lease_until (and calls), and an index on
-- lease_until made each of them a non-HOT update too: a new entry in every index of the
-- row. The reaper, its only reader, looks at in-flight jobs alone, which are few (what the
-- workers hold), so it walks those in any order and sorts them; the index keys on the id,
-- which never changes (and is unique: see above). Pages keep room for an update beside the
-- row (fillfactor), so these updates stay on the page, HOT.
CREATE INDEX jobs_in_flight ON jobs (id) WHERE status IN ('queued', 'running');
DROP INDEX jobs_lease_until;
ALTER TABLE jobs SET (fillfactor = 85);
