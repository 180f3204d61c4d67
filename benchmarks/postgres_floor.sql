-- The floor: the least a queue over PostgreSQL can do, with no tenants, leases or fencing.

-- name: create
CREATE TABLE IF NOT EXISTS {schema}.floor_jobs (
    id bigserial PRIMARY KEY,
    payload jsonb NOT NULL,
    taken boolean NOT NULL DEFAULT false
);

-- name: enqueue
INSERT INTO {schema}.floor_jobs (payload) VALUES ($1::jsonb);

-- name: enqueue_notify
WITH job AS (INSERT INTO {schema}.floor_jobs (payload) VALUES ($1::jsonb) RETURNING id)
SELECT pg_notify('floor_{schema}', id::text) FROM job;

-- name: claim
UPDATE {schema}.floor_jobs SET taken = true
WHERE id IN (
    SELECT id FROM {schema}.floor_jobs WHERE NOT taken ORDER BY id
    LIMIT $1::integer FOR UPDATE SKIP LOCKED
)
RETURNING id;

-- name: complete
DELETE FROM {schema}.floor_jobs WHERE id = $1::bigint;

-- name: clear
DELETE FROM {schema}.floor_jobs;
