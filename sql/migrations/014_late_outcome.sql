-- A call that reports after the reaper recorded it as lost (its worker let the lease lapse:
-- a pause, a partition) keeps the reaper's verdict, which decided the job at the time (a
-- retry, or dead after max_attempts); what the call really did is recorded beside it. The
-- attempt log then never shows a call twice, nor two successes for one job.
ALTER TABLE attempts ADD COLUMN late_outcome text;
ALTER TABLE attempts ADD COLUMN late_http_status integer;
ALTER TABLE attempts ADD COLUMN late_at timestamptz;
