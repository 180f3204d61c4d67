-- Claim-check blobs (durably.postgres.claims). Equal content is one row; a second put never
-- shortens its life. `expires_at` is the store's clock time the blob lapses at.

-- name: put
INSERT INTO {claim_check} (digest, data, expires_at)
VALUES ($1, $2, $3)
ON CONFLICT (digest) DO UPDATE
SET expires_at = GREATEST({claim_check}.expires_at, EXCLUDED.expires_at)
WHERE {claim_check}.expires_at < EXCLUDED.expires_at;

-- name: fetch
SELECT data, expires_at FROM {claim_check} WHERE digest = $1;

-- name: forget
DELETE FROM {claim_check} WHERE digest = $1;

-- name: purge
DELETE FROM {claim_check} WHERE expires_at <= $1;

-- name: held
SELECT count(*) FROM {claim_check};
