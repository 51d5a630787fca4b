-- Workers take queued jobs in the order the dispatcher queued them (its planner already
-- weighed priority, tenants and quotas), then by priority and due time within one claim.
-- Ordering the queue by priority and due time alone let a flooding tenant's older jobs,
-- queued later, overtake a quiet tenant's that the planner had put first.
DROP INDEX jobs_queued_priority;
CREATE INDEX jobs_queued_order ON jobs (queued_at, priority DESC, due_at) WHERE status = 'queued';
