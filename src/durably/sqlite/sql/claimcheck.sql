-- Claim-check blobs (durably.sqlite.claims). Equal content is one row; a second put never
-- shortens its life.

-- name: put
INSERT INTO durably_claim_check (digest, data, expires_at)
VALUES (:digest, :data, :expires_at)
ON CONFLICT (digest) DO UPDATE SET expires_at = max(expires_at, excluded.expires_at);

-- name: fetch
SELECT data, expires_at FROM durably_claim_check WHERE digest = :digest;

-- name: forget
DELETE FROM durably_claim_check WHERE digest = :digest;

-- name: purge
DELETE FROM durably_claim_check WHERE expires_at <= :now;

-- name: count
SELECT count(*) FROM durably_claim_check;
