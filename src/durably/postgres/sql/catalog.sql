-- The workflow catalog: entries, the ordered lines operators page through, and counts.
-- Each line reads one index of {workflow_catalog} newest first (created, workflow
-- descending): $1, $2 the mark to read from (exclusive), $3 the earliest creation time,
-- $4 how many, then the line's own values.

-- name: enter
-- An entry already there is kept; a new one takes the status the workflow reported, if any.
INSERT INTO {workflow_catalog} (workflow, tenant, kind, parent, created, status)
VALUES (
    $1::text, $2::text, $3::text, $4::text, $5::bigint,
    COALESCE((SELECT status FROM {workflow_status} WHERE workflow = $1::text), $6::text)
)
ON CONFLICT (workflow) DO NOTHING;

-- name: tally
-- Tenant '' holds every tenant's counts together.
SELECT kind, status, sum(n)::bigint FROM {workflow_counts}
WHERE tenant = COALESCE($1::text, '')
GROUP BY kind, status
HAVING sum(n) > 0;

-- name: finished_per_minute
-- The ring of workflows ended per minute (schema.sql, {throughput}): every kind's slots of
-- the last 15 minutes by the server's clock (the one the status writes are timed by),
-- with that clock's reading (one row of NULLs besides it when nothing is kept).
WITH clock AS (SELECT extract(epoch FROM now())::float8 AS now)
SELECT t.name, t.minute, t.completed, t.failed, clock.now
FROM clock
LEFT JOIN {throughput} t
    ON t.what = 'workflow' AND t.minute >= floor(clock.now / 60)::bigint - 14;

-- name: line_all
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE (c.created, c.workflow) < ($1::bigint, $2::text COLLATE "C")
  AND c.created >= $3::bigint
ORDER BY c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_tenant
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE c.tenant = $5::text AND (c.created, c.workflow) < ($1::bigint, $2::text COLLATE "C")
  AND c.created >= $3::bigint
ORDER BY c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_kind
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE c.kind = $5::text AND (c.created, c.workflow) < ($1::bigint, $2::text COLLATE "C")
  AND c.created >= $3::bigint
ORDER BY c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE c.status = $5::text AND (c.created, c.workflow) < ($1::bigint, $2::text COLLATE "C")
  AND c.created >= $3::bigint
ORDER BY c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_parent
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE c.parent = $5::text AND (c.created, c.workflow) < ($1::bigint, $2::text COLLATE "C")
  AND c.created >= $3::bigint
ORDER BY c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_tenant_kind
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE c.tenant = $5::text AND c.kind = $6::text AND (c.created, c.workflow) < ($1::bigint, $2::text COLLATE "C")
  AND c.created >= $3::bigint
ORDER BY c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_tenant_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE c.tenant = $5::text AND c.status = $6::text AND (c.created, c.workflow) < ($1::bigint, $2::text COLLATE "C")
  AND c.created >= $3::bigint
ORDER BY c.created DESC, c.workflow DESC
LIMIT $4::integer;
