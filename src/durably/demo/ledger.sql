-- The demo's own tables, beside durably's in the demo file. The simulated model provider
-- writes `demo_bill` itself (it is the provider's bill, not durably's checkpoint), and the
-- tools write `demo_tool_runs`: that is what lets the demo prove, from outside durably's
-- records, that no paid step ran twice.

-- name: create_batches
CREATE TABLE IF NOT EXISTS demo_batches (
    batch INTEGER PRIMARY KEY,
    started_at REAL NOT NULL
);

-- name: create_bill
CREATE TABLE IF NOT EXISTS demo_bill (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    batch INTEGER NOT NULL,
    tenant TEXT NOT NULL,
    workflow TEXT NOT NULL,
    step TEXT NOT NULL,
    worker TEXT NOT NULL,
    started_at REAL NOT NULL,
    billed_at REAL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost_micros INTEGER
);

-- name: create_tool_runs
CREATE TABLE IF NOT EXISTS demo_tool_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    batch INTEGER NOT NULL,
    tenant TEXT NOT NULL,
    workflow TEXT NOT NULL,
    step TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    worker TEXT NOT NULL,
    at REAL NOT NULL
);

-- name: create_control
CREATE TABLE IF NOT EXISTS demo_control (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- name: count_batches
SELECT count(*) FROM demo_batches;

-- name: new_batch
INSERT INTO demo_batches (batch, started_at)
VALUES ((SELECT coalesce(max(batch), 0) + 1 FROM demo_batches), ?)
RETURNING batch;

-- name: set_provider
INSERT INTO demo_control (name, value) VALUES ('provider', ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value;

-- name: start_call
INSERT INTO demo_bill (batch, tenant, workflow, step, worker, started_at)
VALUES (?, ?, ?, ?, ?, ?)
RETURNING id;

-- A call is billed only while the provider answers: the check and the bill are one
-- statement, so once the demo has stalled the provider no further call can be billed.
-- name: bill_call
UPDATE demo_bill
SET billed_at = ?, input_tokens = ?, output_tokens = ?, cost_micros = ?
WHERE id = ?
  AND coalesce((SELECT value FROM demo_control WHERE name = 'provider'), 'answering')
      = 'answering';

-- name: calls_of_batch
SELECT tenant, workflow, step, worker, started_at, billed_at, input_tokens, output_tokens,
       cost_micros
FROM demo_bill
WHERE batch = ?
ORDER BY id;

-- name: record_tool_run
INSERT INTO demo_tool_runs (batch, tenant, workflow, step, tool, outcome, worker, at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: tool_runs_of_batch
SELECT tenant, workflow, step, tool, outcome, worker
FROM demo_tool_runs
WHERE batch = ?
ORDER BY id;
