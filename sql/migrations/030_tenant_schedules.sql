-- How many schedules each tenant has, kept as they are made and deleted. The quota check of
-- every creation (SCHEDULER_TENANT_MAX_SCHEDULES) counted the tenant's schedules, up to the
-- quota: a walk of the tenant's primary-key entries each time, under the tenant's creation
-- lock. A tenant with 100,000 schedules (a quota raised for it) made ~50 a second, 20 ms each.
-- It now reads one row, and makes ~500 a second whatever the count (bench/README.md, issue 15
-- part 24).
--
-- Triggers keep it, not the statements that write schedules: every way a schedule is made or
-- removed (the API, a test's or a bench's own INSERT, a TRUNCATE) keeps it exact. Per
-- statement, with transition tables, as job_tenants (028). A creation reads the count after
-- its insert, whose trigger holds the tenant's row to the commit: creations in a tenant pass
-- that point one at a time, each counting every one committed before it, and the quota is
-- never overshot (the advisory lock each creation took first, for the whole transaction, is
-- no longer needed).
CREATE TABLE tenant_schedules (
  tenant text PRIMARY KEY,
  n      bigint NOT NULL CHECK (n >= 0)
);

INSERT INTO tenant_schedules (tenant, n) SELECT tenant, count(*) FROM schedules GROUP BY tenant;

CREATE FUNCTION tenant_schedules_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tenant_schedules AS t (tenant, n)
  SELECT tenant, count(*) FROM inserted_schedules GROUP BY tenant
  ON CONFLICT (tenant) DO UPDATE SET n = t.n + excluded.n;
  RETURN NULL;
END $$;

CREATE TRIGGER schedules_count_insert
  AFTER INSERT ON schedules
  REFERENCING NEW TABLE AS inserted_schedules
  FOR EACH STATEMENT
  EXECUTE FUNCTION tenant_schedules_insert();

CREATE FUNCTION tenant_schedules_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tenant_schedules t SET n = t.n - d.n
  FROM (SELECT tenant, count(*) AS n FROM deleted_schedules GROUP BY tenant) d
  WHERE t.tenant = d.tenant;
  RETURN NULL;
END $$;

CREATE TRIGGER schedules_count_delete
  AFTER DELETE ON schedules
  REFERENCING OLD TABLE AS deleted_schedules
  FOR EACH STATEMENT
  EXECUTE FUNCTION tenant_schedules_delete();

CREATE FUNCTION tenant_schedules_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE tenant_schedules;
  RETURN NULL;
END $$;

CREATE TRIGGER schedules_count_truncate
  AFTER TRUNCATE ON schedules
  FOR EACH STATEMENT
  EXECUTE FUNCTION tenant_schedules_truncate();

-- Nothing moves a schedule to another tenant; were a statement to, the counts would go wrong
-- silently. It fails instead.
CREATE FUNCTION schedules_tenant_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'a schedule''s tenant never changes (schedule %: % -> %)', OLD.id, OLD.tenant, NEW.tenant;
END $$;

CREATE TRIGGER schedules_tenant_fixed
  BEFORE UPDATE OF tenant ON schedules
  FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant)
  EXECUTE FUNCTION schedules_tenant_fixed();
