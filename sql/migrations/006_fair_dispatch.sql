-- Fair dispatch: the dispatcher samples the oldest due jobs of each tenant and priority class
-- (sign of priority: high, normal, low) and shares each batch between them. This index makes
-- each sample one short index range, and lets the list of tenants with scheduled work be
-- walked one probe per tenant.
CREATE INDEX jobs_scheduled_tenant_class ON jobs (tenant, sign(priority), due_at) WHERE status = 'scheduled';
