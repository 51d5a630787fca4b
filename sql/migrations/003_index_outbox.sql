-- The due-index outbox. A Redis due-time index cannot join a Postgres transaction, so a job
-- write that changes what the index should hold (create, reschedule, cancel, claim) also
-- inserts a row here, in the job's own transaction: both commit or neither does. A relay
-- (src/index/outbox-relay.ts) takes the oldest rows, applies them to Redis and deletes them
-- only after the write succeeded. Delivery is at-least-once (a crash between the Redis write
-- and the delete repeats it), which is harmless: ZADD and ZREM are idempotent, and the
-- dispatcher validates every candidate in SQL anyway.
CREATE TABLE index_outbox (
  id         bigserial   PRIMARY KEY,
  job_id     uuid        NOT NULL,
  -- The job's new due instant; null: remove the job from the index.
  due_at     timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
