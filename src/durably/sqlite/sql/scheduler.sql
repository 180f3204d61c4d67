-- Scheduler entries, one per (namespace, workflow), and where each tenant stands in the
-- rotation (durably_workflow_tenants). :now is the store's clock; `due` is the caller's
-- clock (a deadline the workflow chose). An entry is queued (ready, no hand-out in flight:
-- in its tenant's line), in flight (ready, with a receipt: invisible until visible_at) or
-- sleeping. The order (fairness, in durably.stores.workflows) is decided in Python by
-- durably.sqlite.scheduler and only applied here.

-- name: get_entry
SELECT tenant, state, visible_at, due, receipt, priority FROM durably_workflow_queue
WHERE namespace = :namespace AND workflow = :workflow

-- name: make_ready
INSERT INTO durably_workflow_queue
    (namespace, workflow, tenant, state, visible_at, due, receipt, taken_at, priority)
VALUES (:namespace, :workflow, :tenant, 'ready', :now, NULL, NULL, NULL, :priority)
ON CONFLICT (namespace, workflow) DO UPDATE
SET tenant = :tenant, state = 'ready', visible_at = :now, due = NULL, receipt = NULL,
    taken_at = NULL, priority = :priority

-- name: reprioritize
-- The entry's priority, its visibility kept: a tenant's head goes by age, not priority,
-- so the rotation needs no change.
UPDATE durably_workflow_queue SET priority = :priority
WHERE namespace = :namespace AND workflow = :workflow

-- name: place_tenant
-- ``tenant`` has a newly queued workflow (:at, :workflow): the tenant joins the rotation
-- (a tenant never seen at turn 0), its head the older of the two.
INSERT INTO durably_workflow_tenants (namespace, tenant, turn, head_at, head_workflow, active)
VALUES (:namespace, :tenant, 0, :at, :workflow, 1)
ON CONFLICT (namespace, tenant) DO UPDATE
SET active = 1, head_at = excluded.head_at, head_workflow = excluded.head_workflow
WHERE NOT active OR excluded.head_at < head_at
   OR (excluded.head_at = head_at AND excluded.head_workflow < head_workflow)

-- name: take_first
-- Fairness steps 1 and 3 in one statement: the first tenant of the rotation index, and its
-- highest priority workflow visible longest, then by id (one seek of the ranked lines).
UPDATE durably_workflow_queue
SET visible_at = :now + :lease, receipt = :receipt, taken_at = :now
WHERE namespace = :namespace AND workflow = (
    SELECT q.workflow FROM durably_workflow_queue q
    WHERE q.namespace = :namespace AND q.state = 'ready' AND q.receipt IS NULL
      AND q.tenant = (
          SELECT tenant FROM durably_workflow_tenants
          WHERE namespace = :namespace AND active = 1
          ORDER BY turn, head_at, head_workflow, tenant
          LIMIT 1
      )
    ORDER BY q.priority DESC, q.visible_at, q.workflow
    LIMIT 1
)
RETURNING workflow, tenant

-- name: next_tenant
-- Fairness step 1: the first row of the rotation index (what `take_first` reads).
SELECT tenant FROM durably_workflow_tenants
WHERE namespace = :namespace AND active = 1
ORDER BY turn, head_at, head_workflow, tenant
LIMIT 1

-- name: settle_tenant
-- The tenant's line as it now stands: its head (one seek of the lines index), and whether
-- it stays in the rotation. :served sends it to the back (fairness step 2: two seeks of
-- the rotation index).
UPDATE durably_workflow_tenants
SET turn = CASE WHEN :served THEN 1 + MAX(
        COALESCE((SELECT MAX(turn) FROM durably_workflow_tenants
                  WHERE namespace = :namespace AND active = 0), 0),
        COALESCE((SELECT MAX(turn) FROM durably_workflow_tenants
                  WHERE namespace = :namespace AND active = 1), 0)) ELSE turn END,
    (head_at, head_workflow) = (
        SELECT visible_at, workflow FROM durably_workflow_queue
        WHERE namespace = :namespace AND tenant = :tenant AND state = 'ready'
          AND receipt IS NULL
        ORDER BY visible_at, workflow
        LIMIT 1
    ),
    active = EXISTS (
        SELECT 1 FROM durably_workflow_queue
        WHERE namespace = :namespace AND tenant = :tenant AND state = 'ready'
          AND receipt IS NULL
    )
WHERE namespace = :namespace AND tenant = :tenant

-- name: return_lapsed
-- Hand-outs whose lease lapsed rejoin their tenants' lines, visible since the lapse.
UPDATE durably_workflow_queue SET receipt = NULL, taken_at = NULL
WHERE namespace = :namespace AND workflow IN (
    SELECT workflow FROM durably_workflow_queue
    WHERE namespace = :namespace AND receipt IS NOT NULL AND visible_at <= :now
    ORDER BY visible_at
    LIMIT :most
)
RETURNING tenant, visible_at, workflow

-- name: next_visible_at
-- When a workflow is next visible: now if a tenant is in the rotation, else when the
-- first lease lapses (NULL: nothing ready at all).
SELECT CASE
    WHEN EXISTS (SELECT 1 FROM durably_workflow_tenants
                 WHERE namespace = :namespace AND active = 1) THEN :now
    ELSE (SELECT MIN(visible_at) FROM durably_workflow_queue
          WHERE namespace = :namespace AND receipt IS NOT NULL)
END

-- name: sleep_until
UPDATE durably_workflow_queue
SET state = 'sleeping', due = :due, receipt = NULL, taken_at = NULL
WHERE namespace = :namespace AND workflow = :workflow

-- name: wake_due
UPDATE durably_workflow_queue
SET state = 'ready', visible_at = :now, due = NULL
WHERE namespace = :namespace AND state = 'sleeping' AND due <= :until
RETURNING tenant, workflow

-- name: reclaim
UPDATE durably_workflow_queue
SET visible_at = :now, receipt = NULL, taken_at = NULL
WHERE namespace = :namespace AND receipt IS NOT NULL AND :now - taken_at >= :idle
RETURNING tenant, workflow

-- name: extend
UPDATE durably_workflow_queue SET visible_at = :now + :within
WHERE namespace = :namespace AND workflow = :workflow AND receipt = :receipt

-- name: done
DELETE FROM durably_workflow_queue
WHERE namespace = :namespace AND workflow = :workflow AND receipt = :receipt

-- name: cancel
DELETE FROM durably_workflow_queue WHERE namespace = :namespace AND workflow = :workflow
RETURNING tenant, state, receipt
