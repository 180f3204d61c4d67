-- The retention sweep. Each batch runs inside one BEGIN IMMEDIATE, so no claim, record or
-- status can change between choosing a workflow and deleting it.

-- name: finished
-- Finished workflows last updated before :before whose claim (if any) is not live.
SELECT s.workflow, c.token FROM durably_workflow_status AS s
LEFT JOIN durably_workflow_claim AS c ON c.workflow = s.workflow
WHERE s.status IN (:completed, :failed, :cancelled) AND s.updated_at < :before
  AND (c.workflow IS NULL OR c.alive_until <= :now)
ORDER BY s.updated_at, s.workflow
LIMIT :limit

-- name: delete_records
DELETE FROM durably_workflow_checkpoint WHERE workflow = :workflow

-- name: delete_status
DELETE FROM durably_workflow_status WHERE workflow = :workflow

-- name: delete_claim
DELETE FROM durably_workflow_claim WHERE workflow = :workflow

-- name: delete_inbox
DELETE FROM durably_workflow_inbox WHERE workflow = :workflow

-- name: raise_swept_token
INSERT INTO durably_workflow_swept_token (id, token) VALUES (1, :token)
ON CONFLICT (id) DO UPDATE SET token = MAX(token, excluded.token)

-- name: swept_token
SELECT COALESCE((SELECT token FROM durably_workflow_swept_token WHERE id = 1), 0)

-- name: delete_catalog
DELETE FROM durably_workflow_catalog WHERE workflow = :workflow
