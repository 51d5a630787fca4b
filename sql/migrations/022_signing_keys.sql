-- Signing keys per tenant, and optionally per schedule (issue 16, hole 3). A call is signed
-- with the active keys of its job's schedule if it has any, else its tenant's, else the
-- process-wide SCHEDULER_SIGNING_SECRET. Several active keys in one scope: one `v1,`
-- signature per key (Standard Webhooks rotation).
--
--   secret      the key bytes (HMAC needs them as they are: they cannot be hashed). Shown to
--               the client once, in the answer that created the key; never read by the API
--               again. Workers load them into memory (worker/signing-keyring.ts).
--   retired_at  null: active. An instant: no call started at or after it is signed with the
--               key (a retire sets now(); a rotation sets now() + its overlap).
CREATE TABLE signing_keys (
  id          uuid        PRIMARY KEY,
  tenant      text        NOT NULL,
  schedule_id text,
  secret      bytea       NOT NULL CHECK (octet_length(secret) >= 24),
  created_at  timestamptz NOT NULL DEFAULT now(),
  retired_at  timestamptz,
  replaces    uuid
);
CREATE INDEX signing_keys_scope ON signing_keys (tenant, schedule_id, created_at);
-- What workers load: keys not yet retired.
CREATE INDEX signing_keys_live ON signing_keys (retired_at);
