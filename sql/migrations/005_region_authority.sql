-- Region authority: which region discovers due work and executes it. One row, a lease:
-- the home region's dispatch leader renews lease_until; a standby region may take over once
-- the lease has been expired for its TTL plus a clock-skew margin, or an operator moves it
-- (scheduler failover). Every move bumps the generation, the high half of every fencing
-- token (generation × 2^32 + leader term), so tokens issued after a move are above every
-- token the old region can still issue, even against its old database.
--
-- The first process to start inserts the row with its HOME_REGION; after that the row, not
-- the configuration, says where home is.
CREATE TABLE region_authority (
  id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
  home_region text        NOT NULL,
  generation  bigint      NOT NULL DEFAULT 0 CHECK (generation >= 0 AND generation < 2097152),
  holder      text,
  -- Seeded a TTL ahead, so that a standby started first does not take over at once.
  lease_until timestamptz NOT NULL DEFAULT now(),
  changed_at  timestamptz NOT NULL DEFAULT now()
);
