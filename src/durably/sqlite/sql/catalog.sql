-- The workflow catalog: entries, the ordered lines operators page through, and counts.
-- Each line reads one index of durably_workflow_catalog newest first (created, workflow
-- descending), from before a mark (:created, :workflow) down to :since.

-- name: enter
-- An entry already there is kept; a new one takes the status the workflow reported, if any.
INSERT INTO durably_workflow_catalog (workflow, tenant, kind, parent, created, status)
VALUES (
    :workflow, :tenant, :kind, :parent, :created,
    COALESCE((SELECT status FROM durably_workflow_status WHERE workflow = :workflow), :pending)
)
ON CONFLICT (workflow) DO NOTHING

-- name: drop
DELETE FROM durably_workflow_catalog WHERE workflow = :workflow

-- name: tally
-- Tenant '' holds every tenant's counts together.
SELECT kind, status, n FROM durably_workflow_counts
WHERE tenant = COALESCE(:tenant, '') AND n > 0

-- name: finished_per_minute
-- The ring of workflows ended per minute (schema.sql, durably_throughput): every kind's
-- slots counting :first or later.
SELECT name, minute, completed, failed FROM durably_throughput
WHERE what = 'workflow' AND minute >= :first

-- name: line_all
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit

-- name: line_tenant
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE c.tenant = :tenant AND (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit

-- name: line_kind
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE c.kind = :kind AND (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit

-- name: line_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE c.status = :status AND (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit

-- name: line_parent
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE c.parent = :parent AND (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit

-- name: line_tenant_kind
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE c.tenant = :tenant AND c.kind = :kind AND (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit

-- name: line_tenant_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE c.tenant = :tenant AND c.status = :status AND (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit

-- name: line_kind_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status AS reported, s.attempts, s.last_error, s.updated_at
FROM durably_workflow_catalog AS c
LEFT JOIN durably_workflow_status AS s ON s.workflow = c.workflow
WHERE c.kind = :kind AND c.status = :status AND (c.created, c.workflow) < (:created, :workflow) AND c.created >= :since
ORDER BY c.created DESC, c.workflow DESC
LIMIT :limit
