-- A job may start (be claimed, or called) unless it is an occurrence whose start-by has
-- passed before its first call: that one is the misfire policy's (ExpireMisfired), never a
-- worker's. A retry (calls > 0) has started already and is not held to its start-by.
-- One definition for every claim and the last check before a call (dispatch.sql, worker.sql),
-- which each wrote the condition out.
--
-- Written so the planner inlines it (LANGUAGE sql, one SELECT of an expression, not STRICT,
-- no SECURITY DEFINER, no SET): the claims plan exactly as with the condition written out,
-- so index use does not change. STABLE, not IMMUTABLE: it reads now() (the transaction's
-- start), and a function declared more stable than its body is never inlined.
CREATE FUNCTION claimable(start_by timestamptz, calls integer) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT start_by IS NULL OR start_by > now() OR calls > 0 $$;
