-- Workflow gates (durably.stores.gates): statements of durably.postgres.gates, each run
-- inside the transaction of the write that moves a gated workflow.

-- name: lock_gate
-- The gate's row, created with its limit or given the limit deployed now, locked to the
-- commit: the writes of one gate take turns. A NULL limit (a start from a process not
-- registering the kind) keeps the gate's, or 1 for a gate never used.
INSERT INTO {workflow_gates} AS g (gate, max_admitted, admitted, served)
VALUES ($1::text, coalesce($2::bigint, 1), 0, 0)
ON CONFLICT (gate) DO UPDATE SET max_admitted = coalesce($2::bigint, g.max_admitted)
RETURNING admitted, max_admitted;

-- name: relock_gate
SELECT admitted, max_admitted FROM {workflow_gates} WHERE gate = $1::text FOR UPDATE;

-- name: mark
-- A first start's place (a mark left by a swept workflow of the same id is replaced).
INSERT INTO {workflow_gated} AS m (workflow, gate, tenant, namespace, state, priority)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::smallint)
ON CONFLICT (workflow) DO UPDATE
    SET gate = excluded.gate, tenant = excluded.tenant, namespace = excluded.namespace,
        state = excluded.state, seq = excluded.seq, priority = excluded.priority;

-- name: marked
SELECT gate, state FROM {workflow_gated} WHERE workflow = $1::text;

-- name: move_mark
UPDATE {workflow_gated} SET state = $2::text WHERE workflow = $1::text;

-- name: rerank
-- A queued workflow's priority: its place in its tenant's line (seq keeps its order
-- queued among the workflows of that priority).
UPDATE {workflow_gated} SET priority = $3::smallint
WHERE workflow = $1::text AND gate = $2::text AND state = 'queued'
RETURNING 1;

-- name: unmark
DELETE FROM {workflow_gated} WHERE workflow = $1::text;

-- name: move_admitted
UPDATE {workflow_gates} SET admitted = admitted + $2::bigint WHERE gate = $1::text;

-- name: serve
-- One more admitted, and its tenant to the back of the gate's rotation.
WITH served AS (
    UPDATE {workflow_gates} SET admitted = admitted + 1, served = served + 1
    WHERE gate = $1::text
    RETURNING served
)
INSERT INTO {workflow_gate_turns} AS t (gate, tenant, turn)
SELECT $1::text, $2::text, served FROM served
ON CONFLICT (gate, tenant) DO UPDATE SET turn = excluded.turn;

-- name: next_in_line
-- The head of the line of the tenant with the lowest turn (never admitted: 0): its highest
-- priority workflow, then the one queued first (durably.stores.gates.GateLine).
SELECT g.workflow, g.tenant, g.namespace, g.priority
FROM {workflow_gated} AS g
LEFT JOIN {workflow_gate_turns} AS t ON t.gate = g.gate AND t.tenant = g.tenant
WHERE g.gate = $1::text AND g.state = 'queued'
ORDER BY coalesce(t.turn, 0), g.priority DESC, g.seq
LIMIT 1;

-- name: counts
SELECT admitted,
       (SELECT count(*) FROM {workflow_gated} WHERE gate = $1::text AND state = 'queued')
FROM {workflow_gates} WHERE gate = $1::text;

-- name: write_status
-- The status of a workflow a gate queued or admitted (never run: no attempts, no error).
-- Its catalog entry and counts move with it, as by every status write (checkpointer.sql's
-- _follow, under a fence that always holds: the caller moves the gate in this transaction).
WITH fence AS (SELECT 1),
told AS (SELECT $2::text AS status, $3::text AS state),
{_follow},
reported AS (
    INSERT INTO {workflow_status} AS s (workflow, status, attempts, last_error, updated_at)
    VALUES ($1::text, $2::text, 0, NULL, now())
    ON CONFLICT (workflow) DO UPDATE
        SET status = excluded.status, attempts = 0, last_error = NULL, updated_at = now()
)
SELECT 1;

-- name: lock_throttle
-- The key's reserved instant (NULL: never used), its row locked to the commit.
INSERT INTO {workflow_throttles} AS t (key, tat) VALUES ($1::text, NULL)
ON CONFLICT (key) DO UPDATE SET key = t.key
RETURNING tat;

-- name: set_throttle
UPDATE {workflow_throttles} SET tat = $2::double precision WHERE key = $1::text;
