-- The retention sweep. Candidates are read without locks; each is then swept in its own
-- transaction that first locks the claim row, so a pass cannot claim, record or report a
-- status (all of which lock that row) between the check and the deletes.

-- name: finished
-- $1, $2: the finished statuses; $3: the cutoff; $4: how many.
SELECT s.workflow
FROM {workflow_status} AS s
LEFT JOIN {workflow_claim} AS c ON c.workflow = s.workflow
WHERE s.status IN ($1::text, $2::text) AND s.updated_at < $3::timestamptz
  AND (c.workflow IS NULL OR c.alive_until <= now())
ORDER BY s.updated_at
LIMIT $4::integer;

-- name: lock_claim
-- Whether a live pass holds the workflow (no row: no claim at all).
SELECT alive_until > now() FROM {workflow_claim} WHERE workflow = $1::text FOR UPDATE;

-- name: sweep
-- Re-checked under the claim row lock: only a still finished, still old status goes, and
-- the records and the claim go only with it.
WITH finished AS (
    DELETE FROM {workflow_status}
    WHERE workflow = $1::text AND status IN ($2::text, $3::text)
      AND updated_at < $4::timestamptz
    RETURNING workflow
),
records AS (
    DELETE FROM {workflow_checkpoint} WHERE workflow IN (SELECT workflow FROM finished)
),
claim AS (
    DELETE FROM {workflow_claim} WHERE workflow IN (SELECT workflow FROM finished)
)
SELECT count(*) FROM finished;
