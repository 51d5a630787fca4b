-- A tenant's jobs, for its listing, in a table of their own that the delivery path never
-- writes. jobs_tenant_id (tenant, id) was the one index every version of every job entered:
-- each claim and each completion is a new row version (a status change is never HOT), so it
-- got two entries a delivery, ~15 % of the database's CPU on the delivery path
-- (bench/README.md, issue 15 part 22). A job's tenant and id never change, so one row here
-- per job, written when the job is inserted and removed when it is deleted, answers the same
-- question: which jobs a tenant has, in id (creation) order.
--
-- Triggers keep it, not the statements that write jobs: every way a job row is made or
-- removed (the API's batch, a schedule's occurrences, a test's or a bench's own INSERT, the
-- pruner, a TRUNCATE) keeps it whole. Per statement, with transition tables: one call a
-- batch, as the index capture of created jobs does (019).
CREATE TABLE job_tenants (
  tenant text NOT NULL,
  id     uuid NOT NULL,
  PRIMARY KEY (tenant, id)
);

INSERT INTO job_tenants (tenant, id) SELECT tenant, id FROM jobs;

CREATE FUNCTION job_tenants_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO job_tenants (tenant, id) SELECT tenant, id FROM inserted_jobs;
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_tenants_insert
  AFTER INSERT ON jobs
  REFERENCING NEW TABLE AS inserted_jobs
  FOR EACH STATEMENT
  EXECUTE FUNCTION job_tenants_insert();

-- One probe of the primary key a deleted job: the join is steered to it (a hash join over the
-- whole table would read every tenant's rows to remove a batch).
CREATE FUNCTION job_tenants_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM job_tenants t
  WHERE (t.tenant, t.id) IN (SELECT d.tenant, d.id FROM deleted_jobs d);
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_tenants_delete
  AFTER DELETE ON jobs
  REFERENCING OLD TABLE AS deleted_jobs
  FOR EACH STATEMENT
  EXECUTE FUNCTION job_tenants_delete();

CREATE FUNCTION job_tenants_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE job_tenants;
  RETURN NULL;
END $$;

CREATE TRIGGER jobs_tenants_truncate
  AFTER TRUNCATE ON jobs
  FOR EACH STATEMENT
  EXECUTE FUNCTION job_tenants_truncate();

-- Nothing moves a job to another tenant; were a statement to, the listing would go wrong
-- silently. It fails instead. Fires only for an UPDATE that names the column: none on the
-- delivery path does.
CREATE FUNCTION jobs_tenant_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'a job''s tenant never changes (job %: % -> %)', OLD.id, OLD.tenant, NEW.tenant;
END $$;

CREATE TRIGGER jobs_tenant_fixed
  BEFORE UPDATE OF tenant ON jobs
  FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant)
  EXECUTE FUNCTION jobs_tenant_fixed();

DROP INDEX jobs_tenant_id;
