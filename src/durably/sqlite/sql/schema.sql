-- durably's tables in an embedded SQLite file: schema version 8.
-- Applied by `durably.sqlite.connect` inside one BEGIN IMMEDIATE, so processes opening a
-- fresh file at once create it exactly once. Every statement is idempotent.

-- Runs: the record is JSON; the columns beside it are what queries filter on.
-- `seq` is the creation sequence across tenants (AUTOINCREMENT never reuses a value);
-- `tenant_seq` is the run's place among its tenant's runs, the listing order and the
-- cursor, so a cursor tells a tenant nothing about other tenants' runs. (Schema version 3
-- added the column to earlier files, set to `seq`, which orders each tenant alike.)
CREATE TABLE IF NOT EXISTS durably_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    session_id TEXT,
    state TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    record TEXT NOT NULL,
    tenant_seq INTEGER,
    UNIQUE (tenant, run_id)
);

CREATE UNIQUE INDEX IF NOT EXISTS durably_runs_by_tenant_seq
    ON durably_runs (tenant, tenant_seq);

-- The last `tenant_seq` handed out per tenant: kept when runs are deleted, so a place is
-- never handed out twice and a cursor never skips a run created after it.
CREATE TABLE IF NOT EXISTS durably_run_seq (
    tenant TEXT PRIMARY KEY,
    last INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS durably_runs_by_session
    ON durably_runs (tenant, session_id) WHERE session_id IS NOT NULL;

-- Added in schema version 8: the run record following a workflow (an App's, whose metadata
-- names the workflow's key), found by each status write of that workflow, which stores the
-- run's state in the same transaction.
CREATE INDEX IF NOT EXISTS durably_runs_following
    ON durably_runs (json_extract(record, '$.metadata.durably_workflow'))
    WHERE json_extract(record, '$.metadata.durably_workflow') IS NOT NULL;

CREATE TABLE IF NOT EXISTS durably_sessions (
    tenant TEXT NOT NULL,
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (tenant, session_id)
);

-- Work items. `seq` is the enqueue sequence that breaks exact ties in the claim order.
CREATE TABLE IF NOT EXISTS durably_work (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    queue TEXT NOT NULL,
    payload TEXT NOT NULL,
    priority INTEGER NOT NULL,
    dedupe_key TEXT,
    attempts INTEGER NOT NULL,
    state TEXT NOT NULL,
    worker TEXT,
    enqueued_at REAL NOT NULL,
    available_at REAL NOT NULL,
    lease_expires_at REAL,
    first_claimed_at REAL,
    claimed_at REAL,
    failures TEXT NOT NULL,
    -- Flow control (durably.stores.flow), added in schema version 6.
    concurrency_key TEXT,
    concurrency_limit INTEGER,
    throttle_key TEXT,
    throttle_seconds REAL,
    throttle_burst INTEGER,
    UNIQUE (tenant, id)
);

-- The claimed items of each concurrency key: what a claim counts against an item's limit.
CREATE INDEX IF NOT EXISTS durably_work_running
    ON durably_work (queue, concurrency_key)
    WHERE state = 'claimed' AND concurrency_key IS NOT NULL;

-- Each cron schedule's last fired tick (durably.engine.schedules), added in version 6.
CREATE TABLE IF NOT EXISTS durably_schedule_ticks (
    name TEXT PRIMARY KEY,
    tick REAL NOT NULL
);

-- Each debounce slot's workflow, last arguments and due time (durably.stores.debounce),
-- added in version 7. `begun`: the workflow took the slot; the next start replaces it.
CREATE TABLE IF NOT EXISTS durably_debounces (
    slot TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    args TEXT NOT NULL,
    due REAL NOT NULL,
    begun INTEGER NOT NULL DEFAULT 0
);

-- Each throttle key's theoretical arrival time (the GCRA state of durably.stores.flow).
CREATE TABLE IF NOT EXISTS durably_queue_throttles (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    tat REAL NOT NULL,
    PRIMARY KEY (queue, key)
);

-- A live item owns its dedupe key; a terminal one frees it.
CREATE UNIQUE INDEX IF NOT EXISTS durably_work_live_dedupe
    ON durably_work (tenant, queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND state IN ('queued', 'claimed');

-- Added in version 6: dedupe keys enqueued with a time to live. The row is written with
-- the item; when the item completes or is dead-lettered, `expires_at` is set and `item`
-- holds it finished: until then an enqueue of the key is answered with it. `reap` deletes
-- expired rows through the expiry index, a batch at a time.
CREATE TABLE IF NOT EXISTS durably_dedupe_keys (
    tenant TEXT NOT NULL,
    queue TEXT NOT NULL,
    dedupe_key TEXT NOT NULL,
    id TEXT NOT NULL,
    ttl REAL NOT NULL,
    expires_at REAL,
    item TEXT,
    PRIMARY KEY (tenant, queue, dedupe_key)
);
CREATE INDEX IF NOT EXISTS durably_dedupe_keys_expiry
    ON durably_dedupe_keys (expires_at) WHERE expires_at IS NOT NULL;

CREATE INDEX IF NOT EXISTS durably_work_due
    ON durably_work (queue, state, available_at);

CREATE INDEX IF NOT EXISTS durably_work_by_tenant
    ON durably_work (queue, tenant, state, priority DESC, available_at, seq);

CREATE INDEX IF NOT EXISTS durably_work_leases
    ON durably_work (state, lease_expires_at);

-- Where each tenant of a queue stands in the rotation (durably.sqlite.queue): its turn (0 =
-- never served; the served tenant goes to the back), its oldest queued item (head_at,
-- head_seq; NULL when it has none), and whether it is in the rotation (due = 1: its oldest
-- item was due when it was placed) or waiting for that item to come due (due = 0, promoted
-- by a claim). A claim reads the first row of the rotation index, not every due item.
-- Added in schema version 4; version 3 kept only the turns (durably_work_turns).
CREATE TABLE IF NOT EXISTS durably_queue_tenants (
    queue TEXT NOT NULL,
    tenant TEXT NOT NULL,
    turn INTEGER NOT NULL,
    head_at REAL,
    head_seq INTEGER,
    due INTEGER NOT NULL,
    PRIMARY KEY (queue, tenant)
);

CREATE INDEX IF NOT EXISTS durably_queue_tenants_rotation
    ON durably_queue_tenants (queue, due, turn, head_at, head_seq);

CREATE INDEX IF NOT EXISTS durably_queue_tenants_waiting
    ON durably_queue_tenants (queue, head_at) WHERE due = 0 AND head_at IS NOT NULL;

-- The upgrade from version 3: every tenant with a queued item or a turn, keeping its turn,
-- waiting (the first claim promotes those due), then the turns table goes.
CREATE TABLE IF NOT EXISTS durably_work_turns (
    queue TEXT NOT NULL,
    tenant TEXT NOT NULL,
    turn INTEGER NOT NULL,
    PRIMARY KEY (queue, tenant)
);

INSERT OR IGNORE INTO durably_queue_tenants (queue, tenant, turn, head_at, head_seq, due)
SELECT keys.queue, keys.tenant, COALESCE(t.turn, 0), NULL, NULL, 0
FROM (
    SELECT queue, tenant FROM durably_work WHERE state = 'queued'
    UNION SELECT queue, tenant FROM durably_work_turns
) AS keys
LEFT JOIN durably_work_turns AS t ON t.queue = keys.queue AND t.tenant = keys.tenant;

UPDATE durably_queue_tenants SET (head_at, head_seq) = (
    SELECT w.available_at, w.seq FROM durably_work AS w
    WHERE w.queue = durably_queue_tenants.queue AND w.tenant = durably_queue_tenants.tenant
      AND w.state = 'queued'
    ORDER BY w.available_at, w.seq
    LIMIT 1
)
WHERE head_at IS NULL;

DROP TABLE durably_work_turns;

-- How many items of each queue are in each state, kept by the triggers below with every
-- write (exact, in the same transaction): `stats` reads them instead of counting.
-- Added in schema version 4, counted once from the items on the upgrade.
CREATE TABLE IF NOT EXISTS durably_queue_sizes (
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
);

INSERT OR REPLACE INTO durably_queue_sizes (queue, state, n)
SELECT queue, state, COUNT(*) FROM durably_work GROUP BY queue, state;

CREATE TRIGGER IF NOT EXISTS durably_work_sized_insert AFTER INSERT ON durably_work
BEGIN
    INSERT INTO durably_queue_sizes (queue, state, n) VALUES (new.queue, new.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER IF NOT EXISTS durably_work_sized_delete AFTER DELETE ON durably_work
BEGIN
    UPDATE durably_queue_sizes SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;

CREATE TRIGGER IF NOT EXISTS durably_work_sized_update AFTER UPDATE OF state, queue
ON durably_work WHEN old.state IS NOT new.state OR old.queue IS NOT new.queue
BEGIN
    UPDATE durably_queue_sizes SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT INTO durably_queue_sizes (queue, state, n) VALUES (new.queue, new.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;

CREATE TABLE IF NOT EXISTS durably_queue_counters (
    queue TEXT PRIMARY KEY,
    reaped INTEGER NOT NULL DEFAULT 0,
    duplicates_suppressed INTEGER NOT NULL DEFAULT 0
);

-- Workflow records; `position` is the first-recorded order across the whole file.
CREATE TABLE IF NOT EXISTS durably_workflow_checkpoint (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    written_at REAL NOT NULL,
    UNIQUE (workflow, key)
);

-- One claim row per workflow, deleted only by the retention sweep (which keeps the highest
-- token it deleted in durably_workflow_swept_token), so a token is never rewound.
CREATE TABLE IF NOT EXISTS durably_workflow_claim (
    workflow TEXT PRIMARY KEY,
    token INTEGER NOT NULL,
    held_until REAL NOT NULL,
    alive_until REAL NOT NULL,
    alive_for REAL NOT NULL
);

-- The last inbox position appended per workflow. Never reset, not even by discard, so an
-- inbox key is never reused.
CREATE TABLE IF NOT EXISTS durably_workflow_inbox (
    workflow TEXT PRIMARY KEY,
    position INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS durably_workflow_status (
    workflow TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT,
    updated_at REAL NOT NULL
);

-- What the retention sweep looks for: finished statuses, oldest first.
CREATE INDEX IF NOT EXISTS durably_workflow_status_by_age
    ON durably_workflow_status (status, updated_at);

-- One row: the highest token of any claim the retention sweep deleted. A claim row created
-- afresh starts above it, so a swept workflow's tokens are never rewound.
CREATE TABLE IF NOT EXISTS durably_workflow_swept_token (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    token INTEGER NOT NULL
);

-- Admission (schema version 6, durably.stores.admission): each workflow counted under its
-- tenant (running = 1 while unfinished) and the counts per tenant, kept by the same
-- transactions as the start record, the status writes, discards and the sweep. Workflows
-- a file held before version 6 are not counted.
CREATE TABLE IF NOT EXISTS durably_workflow_admitted (
    workflow TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    running INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS durably_workflow_tenant_counts (
    tenant TEXT PRIMARY KEY,
    running INTEGER NOT NULL,
    started INTEGER NOT NULL
) WITHOUT ROWID;

-- Workflow gates (schema version 7, durably.stores.gates): each gated workflow's place
-- (state 'queued' in its gate's line, 'held' holding a slot, 'free' finished), each gate's
-- limit and admitted count, each tenant's last turn through a gate, and each throttle
-- key's reserved instant; kept by the same transactions as the start record, the status
-- writes, discards and the sweep. A gate's line is its queued rows by priority (a
-- `WorkPriority` value, highest first; added in version 8, connect adds it to a version 7
-- file, NORMAL), then rowid.
CREATE TABLE IF NOT EXISTS durably_workflow_gated (
    workflow TEXT PRIMARY KEY,
    gate TEXT NOT NULL,
    tenant TEXT NOT NULL,
    namespace TEXT NOT NULL,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 20
);

CREATE INDEX IF NOT EXISTS durably_workflow_gated_line
ON durably_workflow_gated (gate, tenant) WHERE state = 'queued';

CREATE TABLE IF NOT EXISTS durably_workflow_gates (
    gate TEXT PRIMARY KEY,
    max_admitted INTEGER NOT NULL,
    admitted INTEGER NOT NULL,
    served INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS durably_workflow_gate_turns (
    gate TEXT NOT NULL,
    tenant TEXT NOT NULL,
    turn INTEGER NOT NULL,
    PRIMARY KEY (gate, tenant)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS durably_workflow_throttles (
    key TEXT PRIMARY KEY,
    tat REAL NOT NULL
) WITHOUT ROWID;

-- Scheduler entries: queued (ready, no hand-out in flight: in its tenant's line), in flight
-- (ready with a receipt: invisible until visible_at) or sleeping (due on the caller's
-- clock). `tenant` added in schema version 5 (connect adds it to earlier files, set to the
-- default tenant, before this script runs); `priority` (a `WorkPriority` value) in version
-- 8 (added likewise, set to NORMAL).
CREATE TABLE IF NOT EXISTS durably_workflow_queue (
    namespace TEXT NOT NULL,
    workflow TEXT NOT NULL,
    state TEXT NOT NULL,
    visible_at REAL NOT NULL,
    due REAL,
    receipt TEXT,
    taken_at REAL,
    tenant TEXT NOT NULL DEFAULT 'default',
    priority INTEGER NOT NULL DEFAULT 20,
    PRIMARY KEY (namespace, workflow)
);

-- Version 5 replaced one index of every ready entry by a line per tenant, the hand-outs in
-- flight by when their lease lapses, and the sleeping entries by due time.
DROP INDEX IF EXISTS durably_workflow_queue_visible;

CREATE INDEX IF NOT EXISTS durably_workflow_queue_lines
    ON durably_workflow_queue (namespace, tenant, visible_at, workflow)
    WHERE state = 'ready' AND receipt IS NULL;

-- Version 8: each line in the order a tenant gives it out (highest priority, then visible
-- longest), what a take seeks; the lines index above keeps each line's oldest, its head.
CREATE INDEX IF NOT EXISTS durably_workflow_queue_ranks
    ON durably_workflow_queue (namespace, tenant, priority DESC, visible_at, workflow)
    WHERE state = 'ready' AND receipt IS NULL;

CREATE INDEX IF NOT EXISTS durably_workflow_queue_in_flight
    ON durably_workflow_queue (namespace, visible_at) WHERE receipt IS NOT NULL;

CREATE INDEX IF NOT EXISTS durably_workflow_queue_sleeping
    ON durably_workflow_queue (namespace, due) WHERE state = 'sleeping';

-- Where each tenant of a namespace stands in the rotation (durably.sqlite.scheduler): its
-- turn (0 = never served; the served tenant goes to the back), the head of its line
-- (head_at, head_workflow) and whether it is in the rotation (active = 1: it has a queued
-- workflow). A hand-out reads the first row of the rotation index, not every entry.
-- Added in schema version 5: a file's queued entries join the rotation, never served.
CREATE TABLE IF NOT EXISTS durably_workflow_tenants (
    namespace TEXT NOT NULL,
    tenant TEXT NOT NULL,
    turn INTEGER NOT NULL,
    head_at REAL,
    head_workflow TEXT,
    active INTEGER NOT NULL,
    PRIMARY KEY (namespace, tenant)
);

CREATE INDEX IF NOT EXISTS durably_workflow_tenants_rotation
    ON durably_workflow_tenants (namespace, active, turn, head_at, head_workflow, tenant);

-- SQLite takes the bare columns from the row MIN() chose: each tenant's head.
INSERT OR IGNORE INTO durably_workflow_tenants
    (namespace, tenant, turn, head_at, head_workflow, active)
SELECT namespace, tenant, 0, MIN(visible_at), workflow, 1
FROM durably_workflow_queue
WHERE state = 'ready' AND receipt IS NULL
GROUP BY namespace, tenant;

-- The workflow catalog (added in schema version 6): every workflow an App started, with its
-- tenant, kind, parent key, creation time (microseconds) and current status, each operator
-- listing reading one index below newest first. The triggers keep `status` with every
-- status write and the counts with every catalog write, in the same transaction.
CREATE TABLE IF NOT EXISTS durably_workflow_catalog (
    workflow TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    parent TEXT,
    created INTEGER NOT NULL,
    status TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS durably_workflow_catalog_all
    ON durably_workflow_catalog (created, workflow);
CREATE INDEX IF NOT EXISTS durably_workflow_catalog_by_tenant
    ON durably_workflow_catalog (tenant, created, workflow);
CREATE INDEX IF NOT EXISTS durably_workflow_catalog_by_kind
    ON durably_workflow_catalog (kind, created, workflow);
CREATE INDEX IF NOT EXISTS durably_workflow_catalog_by_status
    ON durably_workflow_catalog (status, created, workflow);
CREATE INDEX IF NOT EXISTS durably_workflow_catalog_by_parent
    ON durably_workflow_catalog (parent, created, workflow) WHERE parent IS NOT NULL;
CREATE INDEX IF NOT EXISTS durably_workflow_catalog_by_tenant_kind
    ON durably_workflow_catalog (tenant, kind, created, workflow);
CREATE INDEX IF NOT EXISTS durably_workflow_catalog_by_tenant_status
    ON durably_workflow_catalog (tenant, status, created, workflow);
-- Added in version 8: a kind's workflows in one status, so that filter reads its own line.
CREATE INDEX IF NOT EXISTS durably_workflow_catalog_by_kind_status
    ON durably_workflow_catalog (kind, status, created, workflow);

-- How many catalogued workflows each tenant has of each kind in each status (exact), and
-- under tenant '' (no tenant's name: tenants are never empty) every tenant's together, so
-- neither count reads more rows than kinds times statuses.
CREATE TABLE IF NOT EXISTS durably_workflow_counts (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, status)
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS durably_workflow_catalog_counted_insert
AFTER INSERT ON durably_workflow_catalog
BEGIN
    INSERT INTO durably_workflow_counts (tenant, kind, status, n)
    VALUES (new.tenant, new.kind, new.status, 1), ('', new.kind, new.status, 1)
    ON CONFLICT (tenant, kind, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER IF NOT EXISTS durably_workflow_catalog_counted_delete
AFTER DELETE ON durably_workflow_catalog
BEGIN
    UPDATE durably_workflow_counts SET n = n - 1
    WHERE tenant IN (old.tenant, '') AND kind = old.kind AND status = old.status;
END;

CREATE TRIGGER IF NOT EXISTS durably_workflow_catalog_counted_update
AFTER UPDATE OF status ON durably_workflow_catalog WHEN old.status IS NOT new.status
BEGIN
    UPDATE durably_workflow_counts SET n = n - 1
    WHERE tenant IN (old.tenant, '') AND kind = old.kind AND status = old.status;
    INSERT INTO durably_workflow_counts (tenant, kind, status, n)
    VALUES (new.tenant, new.kind, new.status, 1), ('', new.kind, new.status, 1)
    ON CONFLICT (tenant, kind, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER IF NOT EXISTS durably_workflow_status_catalogued_insert
AFTER INSERT ON durably_workflow_status
BEGIN
    UPDATE durably_workflow_catalog SET status = new.status
    WHERE workflow = new.workflow AND status IS NOT new.status;
END;

CREATE TRIGGER IF NOT EXISTS durably_workflow_status_catalogued_update
AFTER UPDATE OF status ON durably_workflow_status WHEN old.status IS NOT new.status
BEGIN
    UPDATE durably_workflow_catalog SET status = new.status
    WHERE workflow = new.workflow AND status IS NOT new.status;
END;

-- Items and workflows finished per minute (durably.stores.throughput), added in schema
-- version 7: a ring of 16 slots per queue (what = 'item') or workflow kind ('workflow').
-- A slot counts one minute (since the epoch); a write for a later minute starts it afresh
-- and a write for an earlier one than it holds is dropped. The queue's finishing writes
-- count items; the trigger below counts catalogued workflows reaching completed or failed.
CREATE TABLE IF NOT EXISTS durably_throughput (
    what TEXT NOT NULL,
    name TEXT NOT NULL,
    slot INTEGER NOT NULL,
    minute INTEGER NOT NULL,
    completed INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    PRIMARY KEY (what, name, slot)
) WITHOUT ROWID;

-- The catalog's status follows every status write (the triggers above), so a catalogued
-- workflow reaching completed or failed is counted here, at its status's time.
CREATE TRIGGER IF NOT EXISTS durably_workflow_catalog_rated
AFTER UPDATE OF status ON durably_workflow_catalog
WHEN new.status IN ('completed', 'failed') AND old.status IS NOT new.status
BEGIN
    INSERT INTO durably_throughput (what, name, slot, minute, completed, failed)
    SELECT 'workflow', new.kind, CAST(s.updated_at / 60 AS INTEGER) % 16,
           CAST(s.updated_at / 60 AS INTEGER), new.status = 'completed',
           new.status = 'failed'
    FROM durably_workflow_status AS s WHERE s.workflow = new.workflow
    ON CONFLICT (what, name, slot) DO UPDATE SET
        completed = excluded.completed + CASE WHEN durably_throughput.minute = excluded.minute
            THEN durably_throughput.completed ELSE 0 END,
        failed = excluded.failed + CASE WHEN durably_throughput.minute = excluded.minute
            THEN durably_throughput.failed ELSE 0 END,
        minute = excluded.minute
    WHERE durably_throughput.minute <= excluded.minute;
END;

-- Run totals per tenant (durably.stores.totals, added in schema version 7): how many runs
-- of each state, and their usage and cost added up (from the record's JSON). The triggers
-- keep them with every run write, in its transaction. Runs of a file made before the table
-- are counted once, when the table is created (this script runs inside the write lock).
CREATE TABLE IF NOT EXISTS durably_run_totals (
    tenant TEXT NOT NULL,
    state TEXT NOT NULL,
    runs INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    cost_micros INTEGER NOT NULL,
    PRIMARY KEY (tenant, state)
) WITHOUT ROWID;

INSERT INTO durably_run_totals (
    tenant, state, runs, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
    reasoning_tokens, requests, tool_calls, cost_micros
)
SELECT tenant, state, count(*),
    sum(json_extract(record, '$.usage.input_tokens')),
    sum(json_extract(record, '$.usage.output_tokens')),
    sum(json_extract(record, '$.usage.cached_tokens')),
    sum(json_extract(record, '$.usage.cache_write_tokens')),
    sum(json_extract(record, '$.usage.reasoning_tokens')),
    sum(json_extract(record, '$.usage.requests')),
    sum(json_extract(record, '$.usage.tool_calls')),
    sum(json_extract(record, '$.cost_micros'))
FROM durably_runs AS r
WHERE NOT EXISTS (SELECT 1 FROM durably_run_totals)
GROUP BY tenant, state;

CREATE TRIGGER IF NOT EXISTS durably_runs_totalled_insert
AFTER INSERT ON durably_runs
BEGIN
    {_run_totals_add_new};
END;

CREATE TRIGGER IF NOT EXISTS durably_runs_totalled_delete
AFTER DELETE ON durably_runs
BEGIN
    {_run_totals_take_old};
END;

CREATE TRIGGER IF NOT EXISTS durably_runs_totalled_update
AFTER UPDATE OF record ON durably_runs
BEGIN
    {_run_totals_take_old};
    {_run_totals_add_new};
END;

-- Claim-check blobs (added in schema version 2), one per distinct content: `digest` is
-- the SHA-256 of `data`, `expires_at` the store's clock time it lapses at (Inf: never).
CREATE TABLE IF NOT EXISTS durably_claim_check (
    digest TEXT PRIMARY KEY,
    data BLOB NOT NULL,
    expires_at REAL NOT NULL
);

-- Fragments: text the statements above take in where they write `{_name}` (SQLite's
-- triggers cannot share a body, so the two that add a run's new row, and the two that
-- take its old row out, are rendered from one text each).

-- name: _run_totals_add_new
INSERT INTO durably_run_totals (
    tenant, state, runs, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
    reasoning_tokens, requests, tool_calls, cost_micros
)
VALUES (
    new.tenant, new.state, 1,
    json_extract(new.record, '$.usage.input_tokens'),
    json_extract(new.record, '$.usage.output_tokens'),
    json_extract(new.record, '$.usage.cached_tokens'),
    json_extract(new.record, '$.usage.cache_write_tokens'),
    json_extract(new.record, '$.usage.reasoning_tokens'),
    json_extract(new.record, '$.usage.requests'),
    json_extract(new.record, '$.usage.tool_calls'),
    json_extract(new.record, '$.cost_micros')
)
ON CONFLICT (tenant, state) DO UPDATE SET runs = runs + 1,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cached_tokens = cached_tokens + excluded.cached_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
    requests = requests + excluded.requests,
    tool_calls = tool_calls + excluded.tool_calls,
    cost_micros = cost_micros + excluded.cost_micros

-- name: _run_totals_take_old
UPDATE durably_run_totals SET runs = runs - 1,
    input_tokens = input_tokens - json_extract(old.record, '$.usage.input_tokens'),
    output_tokens = output_tokens - json_extract(old.record, '$.usage.output_tokens'),
    cached_tokens = cached_tokens - json_extract(old.record, '$.usage.cached_tokens'),
    cache_write_tokens = cache_write_tokens - json_extract(old.record, '$.usage.cache_write_tokens'),
    reasoning_tokens = reasoning_tokens - json_extract(old.record, '$.usage.reasoning_tokens'),
    requests = requests - json_extract(old.record, '$.usage.requests'),
    tool_calls = tool_calls - json_extract(old.record, '$.usage.tool_calls'),
    cost_micros = cost_micros - json_extract(old.record, '$.cost_micros')
WHERE tenant = old.tenant AND state = old.state
