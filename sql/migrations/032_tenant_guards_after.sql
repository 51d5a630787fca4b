-- The tenant guards of 028 and 030 run AFTER the update, not BEFORE. PostgreSQL locks every row
-- an UPDATE changes before it runs a table's BEFORE ROW UPDATE triggers, whether or not one of
-- them fires (`OF tenant` and WHEN are checked after the lock): a lock record in the WAL and
-- the row's page touched once more, for every job a completion wrote (~56 bytes of WAL a job,
-- bench:statements) and every schedule a generation pass moved. An AFTER trigger with the
-- same condition refuses the same statements (its error aborts the statement) without the
-- lock. The claim is not concerned: it locks its rows itself first (FOR UPDATE SKIP LOCKED).
DROP TRIGGER jobs_tenant_fixed ON jobs;
CREATE TRIGGER jobs_tenant_fixed
  AFTER UPDATE OF tenant ON jobs
  FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant)
  EXECUTE FUNCTION jobs_tenant_fixed();

DROP TRIGGER schedules_tenant_fixed ON schedules;
CREATE TRIGGER schedules_tenant_fixed
  AFTER UPDATE OF tenant ON schedules
  FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant)
  EXECUTE FUNCTION schedules_tenant_fixed();
