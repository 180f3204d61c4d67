-- Runs and sessions. Counters live in columns so a patch adds server-side; `tenant_seq` is
-- the run's place among its tenant's runs, the order listing pages by (assigned once,
-- never rewritten).

-- name: get_run
SELECT version, updated_at, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
       reasoning_tokens, requests, tool_calls, cost_micros, iterations, message_cursor,
       body::text, seq
FROM {runs}
WHERE tenant = $1::text AND run_id = $2::text;

-- name: insert_run
-- The run takes its tenant's next place (`tenant_seq`); a tenant's first counter starts
-- after the runs it already has.
WITH place AS (
    INSERT INTO {run_seq} AS counter (tenant, last)
    VALUES (
        $1::text,
        (SELECT coalesce(max(tenant_seq), 0) FROM {runs} WHERE tenant = $1::text) + 1
    )
    ON CONFLICT (tenant) DO UPDATE SET last = counter.last + 1
    RETURNING last
)
INSERT INTO {runs} (
    tenant, run_id, version, state, session_id, updated_at,
    input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens,
    requests, tool_calls, cost_micros, iterations, message_cursor, body, write_token,
    tenant_seq
)
SELECT
    $1::text, $2::text, 1, $3::text, $4::text, $5::float8,
    $6::bigint, $7::bigint, $8::bigint, $9::bigint, $10::bigint,
    $11::bigint, $12::bigint, $13::bigint, $14::bigint, $15::bigint, $16::jsonb, $17::text,
    place.last
FROM place
ON CONFLICT DO NOTHING
RETURNING version;

-- name: update_run
UPDATE {runs}
SET version = version + 1, state = $3::text, session_id = $4::text, updated_at = $5::float8,
    input_tokens = $6::bigint, output_tokens = $7::bigint, cached_tokens = $8::bigint,
    cache_write_tokens = $9::bigint, reasoning_tokens = $10::bigint, requests = $11::bigint,
    tool_calls = $12::bigint, cost_micros = $13::bigint, iterations = $14::bigint,
    message_cursor = $15::bigint, body = $16::jsonb, write_token = $17::text
WHERE tenant = $1::text AND run_id = $2::text AND version = $18::bigint
RETURNING version;

-- name: run_version
-- The stored version, and whether the write holding it carried this token.
SELECT version, write_token IS NOT DISTINCT FROM $3::text
FROM {runs} WHERE tenant = $1::text AND run_id = $2::text;

-- name: patch_run
UPDATE {runs}
SET version = version + 1, updated_at = $3::float8,
    input_tokens = input_tokens + $4::bigint,
    output_tokens = output_tokens + $5::bigint,
    cached_tokens = cached_tokens + $6::bigint,
    cache_write_tokens = cache_write_tokens + $7::bigint,
    reasoning_tokens = reasoning_tokens + $8::bigint,
    requests = requests + $9::bigint,
    tool_calls = tool_calls + $10::bigint,
    cost_micros = cost_micros + $11::bigint,
    iterations = iterations + $12::bigint,
    message_cursor = message_cursor + $13::bigint
WHERE tenant = $1::text AND run_id = $2::text
RETURNING version, updated_at, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
          reasoning_tokens, requests, tool_calls, cost_micros, iterations, message_cursor,
          body::text, seq;

-- name: delete_run
DELETE FROM {runs} WHERE tenant = $1::text AND run_id = $2::text RETURNING 1;

-- name: list_runs
SELECT version, updated_at, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
       reasoning_tokens, requests, tool_calls, cost_micros, iterations, message_cursor,
       body::text, tenant_seq
FROM {runs}
WHERE tenant = $1::text
  AND ($2::text IS NULL OR state = $2::text)
  AND ($3::float8 IS NULL OR updated_at < $3::float8)
  AND tenant_seq > $4::bigint
ORDER BY tenant_seq
LIMIT $5::integer;

-- name: tenants
-- COLLATE "C" orders by UTF-8 bytes, which is code point order, whatever the database's.
SELECT DISTINCT tenant COLLATE "C" AS tenant
FROM {runs}
WHERE ($1::text IS NULL OR tenant COLLATE "C" > $1::text COLLATE "C")
ORDER BY tenant COLLATE "C"
LIMIT $2::integer;

-- name: get_session
SELECT version, updated_at, body::text
FROM {sessions}
WHERE tenant = $1::text AND session_id = $2::text;

-- name: insert_session
INSERT INTO {sessions} (tenant, session_id, version, updated_at, body, write_token)
VALUES ($1::text, $2::text, 1, $3::float8, $4::jsonb, $5::text)
ON CONFLICT DO NOTHING
RETURNING version;

-- name: update_session
UPDATE {sessions}
SET version = version + 1, updated_at = $3::float8, body = $4::jsonb, write_token = $5::text
WHERE tenant = $1::text AND session_id = $2::text AND version = $6::bigint
RETURNING version;

-- name: session_version
-- The stored version, and whether the write holding it carried this token.
SELECT version, write_token IS NOT DISTINCT FROM $3::text
FROM {sessions} WHERE tenant = $1::text AND session_id = $2::text;

-- name: lock_session
SELECT 1 FROM {sessions} WHERE tenant = $1::text AND session_id = $2::text FOR UPDATE;

-- name: live_session_runs
SELECT run_id FROM {runs}
WHERE tenant = $1::text AND session_id = $2::text AND state = ANY($3::text[])
ORDER BY seq;

-- name: delete_session_runs
DELETE FROM {runs} WHERE tenant = $1::text AND session_id = $2::text;

-- name: delete_session
DELETE FROM {sessions} WHERE tenant = $1::text AND session_id = $2::text RETURNING 1;

-- name: tenant_totals
-- The named tenants' rows (at most 8 shards per state each).
SELECT tenant, state, runs, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
       reasoning_tokens, requests, tool_calls, cost_micros
FROM {run_totals}
WHERE tenant = ANY($1::text[]);

-- name: first_tenant_totals
-- The rows of the first $2 tenants after $1 with a run, in code point order (COLLATE "C").
SELECT tenant, state, runs, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
       reasoning_tokens, requests, tool_calls, cost_micros
FROM {run_totals}
WHERE tenant IN (
    SELECT DISTINCT tenant FROM {run_totals}
    WHERE runs > 0 AND ($1::text IS NULL OR tenant > $1::text)
    ORDER BY tenant
    LIMIT $2::integer
);

-- name: _run_fields
-- A new run record as a JSON object holds it (insert_run's parameters by column name), as
-- jsonb_to_record(set)'s column definitions.
tenant text, run_id text, state text, session_id text, updated_at float8,
input_tokens bigint, output_tokens bigint, cached_tokens bigint,
cache_write_tokens bigint, reasoning_tokens bigint, requests bigint,
tool_calls bigint, cost_micros bigint, iterations bigint, message_cursor bigint,
body text

-- name: _run_columns
-- The columns a new run record is inserted with, and (_run_values) its values from such
-- an object `a`, up to the write token and the tenant's place that follow them.
tenant, run_id, version, state, session_id, updated_at,
input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens,
requests, tool_calls, cost_micros, iterations, message_cursor, body, write_token,
tenant_seq

-- name: _run_values
a.tenant, a.run_id, 1, a.state, a.session_id, a.updated_at,
a.input_tokens, a.output_tokens, a.cached_tokens, a.cache_write_tokens,
a.reasoning_tokens, a.requests, a.tool_calls, a.cost_micros, a.iterations,
a.message_cursor, a.body::jsonb

-- name: insert_runs
-- insert_run of each run not stored yet, in one statement: $1 the runs as a JSON array of
-- objects (insert_run's parameters by column name, and n: the run's place in the array),
-- $2 the write token. Each tenant's
-- counter moves once, by its new runs, which take its places in the order given; a run
-- written meanwhile by another writer keeps its own row (its place is skipped). Answers
-- the runs it wrote.
WITH asked AS (
    SELECT a.*, row_number() OVER (PARTITION BY a.tenant ORDER BY a.n) AS nth
    FROM jsonb_to_recordset($1::jsonb) AS a(
        {_run_fields}, n bigint
    )
    WHERE NOT EXISTS (
        SELECT 1 FROM {runs} AS r WHERE r.tenant = a.tenant AND r.run_id = a.run_id
    )
),
wanted AS (SELECT tenant, count(*) AS n FROM asked GROUP BY tenant),
place AS (
    INSERT INTO {run_seq} AS counter (tenant, last)
    SELECT w.tenant,
           (SELECT coalesce(max(tenant_seq), 0) FROM {runs} WHERE tenant = w.tenant) + w.n
    FROM wanted AS w
    ORDER BY w.tenant
    ON CONFLICT (tenant) DO UPDATE
        SET last = counter.last
            + (SELECT w.n FROM wanted AS w WHERE w.tenant = excluded.tenant)
    RETURNING tenant, last
)
INSERT INTO {runs} ({_run_columns})
SELECT {_run_values}, $2::text, place.last - w.n + a.nth
FROM asked AS a
JOIN wanted AS w ON w.tenant = a.tenant
JOIN place ON place.tenant = a.tenant
ORDER BY a.tenant, a.run_id
ON CONFLICT DO NOTHING
RETURNING tenant, run_id;
