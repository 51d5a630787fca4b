-- name: StorePayload
-- Content-addressed: a body already stored is only marked as in use again (which also keeps
-- retention off it, and waits for a prune of it in flight to finish, then stores it afresh).
INSERT INTO payloads (hash, size, body) VALUES ($1, $2, $3::bytea)
ON CONFLICT (hash) DO UPDATE SET used_at = now();

-- name: GetPayload
SELECT body FROM payloads WHERE hash = $1;
