-- Statements of the connection itself: the schema version and the store's clock.

-- name: create_schema_version
CREATE TABLE IF NOT EXISTS durably_schema_version (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    version INTEGER NOT NULL
)

-- name: get_schema_version
SELECT version FROM durably_schema_version WHERE singleton = 1

-- name: set_schema_version
INSERT INTO durably_schema_version (singleton, version) VALUES (1, :version)
ON CONFLICT (singleton) DO UPDATE SET version = excluded.version

-- name: now_subsec
-- The store's clock in seconds since the epoch (SQLite >= 3.42 has 'subsec').
SELECT unixepoch('now', 'subsec')

-- name: now_julianday
-- The same clock on older SQLite: milliseconds are kept by julianday('now').
SELECT (julianday('now') - 2440587.5) * 86400.0

-- name: begin_write
-- Takes the write lock at once, so a read-check-write cannot be overtaken by another process.
BEGIN IMMEDIATE

-- name: begin_read
BEGIN DEFERRED

-- name: journal_wal
PRAGMA journal_mode = WAL

-- name: synchronous_full
PRAGMA synchronous = FULL

-- name: page_cache
-- The connection's page cache, {kib} KiB (a negative size is in KiB; PRAGMA binds no
-- parameter, so the caller formats in the validated whole number).
PRAGMA cache_size = -{kib}

-- name: data_version
-- Changes when another connection commits to the file (never for this connection's own).
PRAGMA data_version

-- name: runs_columns
SELECT name FROM pragma_table_info('durably_runs')

-- name: add_tenant_seq
ALTER TABLE durably_runs ADD COLUMN tenant_seq INTEGER

-- name: fill_tenant_seq
UPDATE durably_runs SET tenant_seq = seq WHERE tenant_seq IS NULL

-- name: workflow_queue_columns
SELECT name FROM pragma_table_info('durably_workflow_queue')

-- name: add_workflow_tenant
ALTER TABLE durably_workflow_queue ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'

-- name: add_workflow_priority
ALTER TABLE durably_workflow_queue ADD COLUMN priority INTEGER NOT NULL DEFAULT 20

-- name: gated_columns
SELECT name FROM pragma_table_info('durably_workflow_gated')

-- name: add_gated_priority
ALTER TABLE durably_workflow_gated ADD COLUMN priority INTEGER NOT NULL DEFAULT 20

-- name: work_columns
SELECT name FROM pragma_table_info('durably_work')

-- name: add_work_flow
ALTER TABLE durably_work ADD COLUMN concurrency_key TEXT;
ALTER TABLE durably_work ADD COLUMN concurrency_limit INTEGER;
ALTER TABLE durably_work ADD COLUMN throttle_key TEXT;
ALTER TABLE durably_work ADD COLUMN throttle_seconds REAL;
ALTER TABLE durably_work ADD COLUMN throttle_burst INTEGER

-- name: follow_runs
-- The upgrade to version 8: each run record following a catalogued workflow takes the run
-- state of the workflow's status (:states maps status to run state), as every status write
-- stores it from then on.
UPDATE durably_runs
SET state = m.value, version = durably_runs.version + 1,
    record = json_set(record, '$.state', m.value, '$.version', durably_runs.version + 1)
FROM durably_workflow_catalog AS c
JOIN durably_workflow_status AS s ON s.workflow = c.workflow
JOIN json_each(:states) AS m ON m.key = s.status
WHERE json_extract(durably_runs.record, '$.metadata.durably_workflow') = c.workflow
  AND durably_runs.tenant = c.tenant
  AND durably_runs.state <> m.value
