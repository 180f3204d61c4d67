-- Runs and sessions. Compare-and-set is checked by the caller inside BEGIN IMMEDIATE.

-- name: get_run
SELECT record FROM durably_runs WHERE tenant = :tenant AND run_id = :run_id

-- name: run_version
SELECT version FROM durably_runs WHERE tenant = :tenant AND run_id = :run_id

-- name: next_run_place
-- The tenant's next `tenant_seq`; a tenant's first counter starts after its existing runs.
INSERT INTO durably_run_seq (tenant, last)
VALUES (
    :tenant,
    (SELECT coalesce(max(tenant_seq), 0) FROM durably_runs WHERE tenant = :tenant) + 1
)
ON CONFLICT (tenant) DO UPDATE SET last = last + 1
RETURNING last

-- name: insert_run
INSERT INTO durably_runs (
    tenant, run_id, session_id, state, version, updated_at, record, tenant_seq
)
VALUES (:tenant, :run_id, :session_id, :state, :version, :updated_at, :record, :place)

-- name: update_run
-- An update keeps `seq`, so a run never moves in the listing order.
UPDATE durably_runs
SET session_id = :session_id, state = :state, version = :version,
    updated_at = :updated_at, record = :record
WHERE tenant = :tenant AND run_id = :run_id

-- name: delete_run
DELETE FROM durably_runs WHERE tenant = :tenant AND run_id = :run_id

-- name: list_runs
-- One row beyond the page says whether another page follows.
SELECT tenant_seq, record FROM durably_runs
WHERE tenant = :tenant
  AND tenant_seq > :after
  AND (:state IS NULL OR state = :state)
  AND (:updated_before IS NULL OR updated_at < :updated_before)
ORDER BY tenant_seq
LIMIT :limit

-- name: tenants
-- SQLite compares text by its UTF-8 bytes: code point order.
SELECT DISTINCT tenant FROM durably_runs
WHERE (:after IS NULL OR tenant > :after)
ORDER BY tenant
LIMIT :limit

-- name: live_session_runs
SELECT run_id FROM durably_runs
WHERE tenant = :tenant AND session_id = :session_id
  AND state IN (SELECT value FROM json_each(:live_states))
ORDER BY seq

-- name: delete_session_runs
DELETE FROM durably_runs WHERE tenant = :tenant AND session_id = :session_id

-- name: get_session
SELECT record FROM durably_sessions WHERE tenant = :tenant AND session_id = :session_id

-- name: session_version
SELECT version FROM durably_sessions WHERE tenant = :tenant AND session_id = :session_id

-- name: upsert_session
INSERT INTO durably_sessions (tenant, session_id, version, record)
VALUES (:tenant, :session_id, :version, :record)
ON CONFLICT (tenant, session_id) DO UPDATE
SET version = excluded.version, record = excluded.record

-- name: delete_session
DELETE FROM durably_sessions WHERE tenant = :tenant AND session_id = :session_id

-- name: tenant_totals
-- The named tenants' rows (one per state each).
SELECT tenant, state, runs, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
       reasoning_tokens, requests, tool_calls, cost_micros
FROM durably_run_totals
WHERE tenant IN (SELECT value FROM json_each(:tenants))

-- name: first_tenant_totals
-- The rows of the first :limit tenants after :after with a run, in code point order.
SELECT tenant, state, runs, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
       reasoning_tokens, requests, tool_calls, cost_micros
FROM durably_run_totals
WHERE tenant IN (
    SELECT DISTINCT tenant FROM durably_run_totals
    WHERE runs > 0 AND (:after IS NULL OR tenant > :after)
    ORDER BY tenant
    LIMIT :limit
)
