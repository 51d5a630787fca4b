-- name: StorePayloads
-- Content-addressed: a body already stored is only marked as in use again (which also keeps
-- retention off it, and waits for a prune of it in flight to finish, then stores it afresh).
-- A batch in one statement: hashes $1 (distinct, sorted, so concurrent batches lock in one
-- order), sizes $2, bodies $3 as hex (a text[] both drivers send alike).
INSERT INTO payloads (hash, size, body)
SELECT p.hash, p.size, decode(p.body, 'hex')
FROM unnest($1::text[], $2::int[], $3::text[]) AS p(hash, size, body)
ON CONFLICT (hash) DO UPDATE SET used_at = now();

-- name: GetPayload
SELECT body FROM payloads WHERE hash = $1;
