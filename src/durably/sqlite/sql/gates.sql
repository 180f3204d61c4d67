-- Workflow gates (durably.stores.gates): statements of durably.sqlite.gates.

-- name: gate
SELECT max_admitted, admitted FROM durably_workflow_gates WHERE gate = :gate;

-- name: set_limit
-- The limit deployed now; NULL (a start from a process not registering the kind) keeps
-- the gate's, or 1 for a gate never used.
INSERT INTO durably_workflow_gates (gate, max_admitted, admitted, served)
VALUES (:gate, coalesce(:limit, 1), 0, 0)
ON CONFLICT (gate) DO UPDATE SET max_admitted = coalesce(:limit, max_admitted);

-- name: mark
INSERT INTO durably_workflow_gated (workflow, gate, tenant, namespace, state, priority)
VALUES (:workflow, :gate, :tenant, :namespace, :state, :priority);

-- name: marked
SELECT gate, tenant, namespace, state FROM durably_workflow_gated WHERE workflow = :workflow;

-- name: move_mark
UPDATE durably_workflow_gated SET state = :state WHERE workflow = :workflow;

-- name: rerank
-- A queued workflow's priority: its place in its tenant's line (rowid keeps its order
-- queued among the workflows of that priority).
UPDATE durably_workflow_gated SET priority = :priority
WHERE workflow = :workflow AND gate = :gate AND state = 'queued';

-- name: unmark
DELETE FROM durably_workflow_gated WHERE workflow = :workflow;

-- name: move_admitted
UPDATE durably_workflow_gates SET admitted = admitted + :delta WHERE gate = :gate;

-- name: serve
-- One more admitted, and the tenant to the back of the gate's rotation.
UPDATE durably_workflow_gates SET admitted = admitted + 1, served = served + 1
WHERE gate = :gate
RETURNING served;

-- name: take_turn
INSERT INTO durably_workflow_gate_turns (gate, tenant, turn) VALUES (:gate, :tenant, :turn)
ON CONFLICT (gate, tenant) DO UPDATE SET turn = excluded.turn;

-- name: next_in_line
-- The head of the line of the tenant with the lowest turn (never admitted: 0): its highest
-- priority workflow, then the one queued first (durably.stores.gates.GateLine).
SELECT g.workflow, g.tenant, g.namespace, g.priority
FROM durably_workflow_gated AS g
LEFT JOIN durably_workflow_gate_turns AS t ON t.gate = g.gate AND t.tenant = g.tenant
WHERE g.gate = :gate AND g.state = 'queued'
ORDER BY coalesce(t.turn, 0), g.priority DESC, g.rowid
LIMIT 1;

-- name: queued
SELECT count(*) FROM durably_workflow_gated WHERE gate = :gate AND state = 'queued';

-- name: throttle
SELECT tat FROM durably_workflow_throttles WHERE key = :key;

-- name: set_throttle
INSERT INTO durably_workflow_throttles (key, tat) VALUES (:key, :tat)
ON CONFLICT (key) DO UPDATE SET tat = excluded.tat;
