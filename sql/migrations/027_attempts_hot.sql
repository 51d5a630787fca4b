-- The attempt row's completion as a HOT update (heap-only: no index entry written, the new
-- version on the same page). An attempt is inserted by the pre-call check and updated once
-- by its completion; that update was the most expensive part of CompleteAttempts (~20 µs of
-- server time a job, bench/README.md "Where the burst waits"): it wrote a new entry into
-- every index of the table, one of which (attempts_finished_at) indexed the very column the
-- completion sets, and with full pages it had to find room for the new version elsewhere.
--
-- * Attempt ids become version 7 UUIDs (time-ordered, RFC 9562; the worker makes them, see
--   StartAttempts): inserts go to the right edge of the primary key instead of a random leaf,
--   and "the attempts started since T" is a range of the primary key, which is what the stats
--   window now reads (StatsRecentAttempts).
-- * attempts_finished_at goes: no index names a column the completion writes.
-- * fillfactor 50: an insert leaves half of each page free, room for the one update each row
--   gets, so the new version stays on its page.

-- The smallest version 7 UUID of the millisecond of `at`: ids ≥ it were made at or after it.
CREATE FUNCTION uuid_v7_floor(at timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT encode(substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
    || '\x70000000000000000000'::bytea, 'hex')::uuid
$$;

DROP INDEX IF EXISTS attempts_finished_at;
ALTER TABLE attempts SET (fillfactor = 50);
