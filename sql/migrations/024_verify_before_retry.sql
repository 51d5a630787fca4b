-- Verify before retry (API.md): a job or schedule may name a URL that answers whether the
-- target already processed a call. Before a job whose last call's outcome is unknown
-- (possibly_delivered) is called again, the worker asks it; "processed" ends the job
-- succeeded without a second call, and that attempt is marked verified.
-- Nullable, no default: adding these columns rewrites nothing.
ALTER TABLE jobs ADD COLUMN verify_url text;
ALTER TABLE schedules ADD COLUMN verify_url text;
ALTER TABLE attempts ADD COLUMN verified boolean NOT NULL DEFAULT false;
