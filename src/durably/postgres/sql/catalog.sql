-- The workflow catalog: entries, the ordered lines operators page through, and counts.
-- Each line reads one index of {workflow_catalog} newest first (created, workflow
-- descending): $1, $2 the mark to read from (exclusive), $3 the earliest creation time,
-- $4 how many, then the line's own values.
--
-- A line's values are bounds of one row range over its index's columns, and its order
-- names them, rather than `tenant = $5`: with an equality the planner may read the index
-- of every workflow and drop other tenants' rows (its generic plan does whenever a value's
-- average share looks large), which walks the whole store for a tenant or status with no
-- recent rows. Only the line's own index gives this order and seeks both bounds.

-- name: enter
-- An entry already there is kept; a new one takes the status the workflow reported, if any.
INSERT INTO {workflow_catalog} (workflow, tenant, kind, parent, created, status)
VALUES (
    $1::text, $2::text, $3::text, $4::text, $5::bigint,
    COALESCE((SELECT status FROM {workflow_status} WHERE workflow = $1::text), $6::text)
)
ON CONFLICT (workflow) DO NOTHING;

-- name: lock_counts_many
-- Before `enter_many`, in its transaction: the count rows its entries' trigger will add to,
-- taken in one order (each tenant's rows, then every tenant's: the order a single entry's
-- trigger takes them in), so two batches, or a batch and a single entry, never wait on
-- each other in a cycle. Adds nothing.
INSERT INTO {workflow_counts} AS c (tenant, kind, status, shard, n)
SELECT DISTINCT t.tenant, e.kind, COALESCE(s.status, $4::text), hashtext(e.workflow) & 15, 0
FROM unnest($1::text[], $2::text[], $3::text[]) AS e (workflow, tenant, kind)
CROSS JOIN LATERAL (VALUES (e.tenant), ('')) AS t (tenant)
LEFT JOIN {workflow_status} AS s ON s.workflow = e.workflow
ORDER BY 1 DESC, 2, 3, 4
ON CONFLICT (tenant, kind, status, shard) DO UPDATE SET n = c.n;

-- name: enter_many
-- `enter` for many workflows at once: $1 to $5 their columns as arrays.
INSERT INTO {workflow_catalog} (workflow, tenant, kind, parent, created, status)
SELECT e.workflow, e.tenant, e.kind, e.parent, e.created, COALESCE(s.status, $6::text)
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
    AS e (workflow, tenant, kind, parent, created)
LEFT JOIN {workflow_status} AS s ON s.workflow = e.workflow
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
WHERE (c.tenant, c.created, c.workflow) < ($5::text COLLATE "C", $1::bigint, $2::text COLLATE "C")
  AND (c.tenant, c.created) >= ($5::text COLLATE "C", $3::bigint)
ORDER BY c.tenant DESC, c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_kind
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE (c.kind, c.created, c.workflow) < ($5::text COLLATE "C", $1::bigint, $2::text COLLATE "C")
  AND (c.kind, c.created) >= ($5::text COLLATE "C", $3::bigint)
ORDER BY c.kind DESC, c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE (c.status, c.created, c.workflow) < ($5::text, $1::bigint, $2::text COLLATE "C")
  AND (c.status, c.created) >= ($5::text, $3::bigint)
ORDER BY c.status DESC, c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_parent
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE (c.parent, c.created, c.workflow) < ($5::text COLLATE "C", $1::bigint, $2::text COLLATE "C")
  AND (c.parent, c.created) >= ($5::text COLLATE "C", $3::bigint)
  AND c.parent IS NOT NULL
ORDER BY c.parent DESC, c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_tenant_kind
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE (c.tenant, c.kind, c.created, c.workflow) < ($5::text COLLATE "C", $6::text COLLATE "C", $1::bigint, $2::text COLLATE "C")
  AND (c.tenant, c.kind, c.created) >= ($5::text COLLATE "C", $6::text COLLATE "C", $3::bigint)
ORDER BY c.tenant DESC, c.kind DESC, c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_tenant_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE (c.tenant, c.status, c.created, c.workflow) < ($5::text COLLATE "C", $6::text, $1::bigint, $2::text COLLATE "C")
  AND (c.tenant, c.status, c.created) >= ($5::text COLLATE "C", $6::text, $3::bigint)
ORDER BY c.tenant DESC, c.status DESC, c.created DESC, c.workflow DESC
LIMIT $4::integer;

-- name: line_kind_status
SELECT c.workflow, c.tenant, c.kind, c.parent, c.created, c.status,
       s.status, s.attempts, s.last_error, s.updated_at
FROM {workflow_catalog} AS c
LEFT JOIN {workflow_status} AS s ON s.workflow = c.workflow
WHERE (c.kind, c.status, c.created, c.workflow) < ($5::text COLLATE "C", $6::text, $1::bigint, $2::text COLLATE "C")
  AND (c.kind, c.status, c.created) >= ($5::text COLLATE "C", $6::text, $3::bigint)
ORDER BY c.kind DESC, c.status DESC, c.created DESC, c.workflow DESC
LIMIT $4::integer;
