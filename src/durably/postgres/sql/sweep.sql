-- The retention sweep. Candidates are read without locks; each is then swept in its own
-- transaction that first locks the claim row, so a pass cannot claim, record or report a
-- status (all of which lock that row) between the check and the deletes.

-- name: finished
-- $1: the finished statuses; $2: the cutoff; $3: how many.
SELECT s.workflow
FROM {workflow_status} AS s
LEFT JOIN {workflow_claim} AS c ON c.workflow = s.workflow
WHERE s.status = ANY($1::text[]) AND s.updated_at < $2::timestamptz
  AND (c.workflow IS NULL OR c.alive_until <= now())
ORDER BY s.updated_at, s.workflow
LIMIT $3::integer;

-- name: lock_claim
-- Whether a live pass holds the workflow (no row: no claim at all).
SELECT alive_until > now() FROM {workflow_claim} WHERE workflow = $1::text FOR UPDATE;

-- name: sweep
-- Re-checked under the claim row lock: only a still finished, still old status goes, and
-- the records and the claim go only with it.
WITH finished AS (
    DELETE FROM {workflow_status}
    WHERE workflow = $1::text AND status = ANY($2::text[])
      AND updated_at < $3::timestamptz
    RETURNING workflow
),
records AS (
    DELETE FROM {workflow_checkpoint} WHERE workflow IN (SELECT workflow FROM finished)
),
claim AS (
    DELETE FROM {workflow_claim} WHERE workflow IN (SELECT workflow FROM finished)
),
unadmitted AS (
    DELETE FROM {workflow_admitted} WHERE workflow IN (SELECT workflow FROM finished)
    RETURNING tenant, running
),
uncounted AS (
    -- On the workflow's shard of its tenant's counts (checkpointer.sql's _shard).
    INSERT INTO {workflow_tenant_counts} AS c (tenant, shard, running, started)
    SELECT tenant, hashtext($1::text) & 15, CASE WHEN running THEN -1 ELSE 0 END, -1
    FROM unadmitted
    ON CONFLICT (tenant, shard) DO UPDATE
        SET running = c.running + excluded.running, started = c.started + excluded.started
),
catalogued AS (
    DELETE FROM {workflow_catalog} WHERE workflow IN (SELECT workflow FROM finished)
),
ungated AS (
    -- A finished workflow's gate mark holds nothing: it goes with the workflow.
    DELETE FROM {workflow_gated} WHERE workflow IN (SELECT workflow FROM finished)
)
SELECT count(*) FROM finished;
