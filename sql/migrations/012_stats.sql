-- Recent throughput and lag for GET /v1/stats and the dashboard: attempts that finished in
-- the last few minutes, found without reading the whole attempts table.
CREATE INDEX IF NOT EXISTS attempts_finished_at ON attempts (finished_at) WHERE finished_at IS NOT NULL;
