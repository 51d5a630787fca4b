-- Sharded dispatch (issue 9). A job's slot comes from its id (the last 12 bits of a UUIDv7,
-- which are random), a schedule's from a hash of (tenant, id); shard = slot × shards / 4096,
-- so each shard is a contiguous range of slots and the number of shards (a setting, ≤ 1024)
-- needs no rewrite of rows. Each shard is leased in `leases` as 'dispatch:<n>'.
ALTER TABLE jobs ADD COLUMN slot int GENERATED ALWAYS AS (('x' || right(id::text, 3))::bit(12)::int) STORED;
ALTER TABLE schedules ADD COLUMN slot int GENERATED ALWAYS AS (hashtext(tenant || '/' || id) & 4095) STORED;
-- Since when the holder has held the lease (a renewal keeps it; a handoff moves it).
ALTER TABLE leases ADD COLUMN acquired_at timestamptz;
