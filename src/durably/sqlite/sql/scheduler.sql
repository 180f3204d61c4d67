-- Scheduler entries, one per (namespace, workflow). :now is the store's clock; `due` is
-- the caller's clock (a deadline the workflow chose).

-- name: make_ready
INSERT INTO durably_workflow_queue (namespace, workflow, state, visible_at, due, receipt, taken_at)
VALUES (:namespace, :workflow, 'ready', :now, NULL, NULL, NULL)
ON CONFLICT (namespace, workflow) DO UPDATE
SET state = 'ready', visible_at = :now, due = NULL, receipt = NULL, taken_at = NULL

-- name: take_next
UPDATE durably_workflow_queue
SET visible_at = :now + :lease, receipt = :receipt, taken_at = :now
WHERE namespace = :namespace AND workflow = (
    SELECT workflow FROM durably_workflow_queue
    WHERE namespace = :namespace AND state = 'ready' AND visible_at <= :now
    ORDER BY visible_at, workflow
    LIMIT 1
)
RETURNING workflow

-- name: next_visible_at
SELECT MIN(visible_at) FROM durably_workflow_queue
WHERE namespace = :namespace AND state = 'ready'

-- name: get_entry
SELECT state, due, receipt FROM durably_workflow_queue
WHERE namespace = :namespace AND workflow = :workflow

-- name: sleep_until
UPDATE durably_workflow_queue
SET state = 'sleeping', due = :due, receipt = NULL, taken_at = NULL
WHERE namespace = :namespace AND workflow = :workflow

-- name: wake_due
UPDATE durably_workflow_queue
SET state = 'ready', visible_at = :now, due = NULL
WHERE namespace = :namespace AND state = 'sleeping' AND due <= :until

-- name: reclaim
UPDATE durably_workflow_queue
SET visible_at = :now, receipt = NULL, taken_at = NULL
WHERE namespace = :namespace AND receipt IS NOT NULL AND :now - taken_at >= :idle
RETURNING workflow

-- name: extend
UPDATE durably_workflow_queue SET visible_at = :now + :within
WHERE namespace = :namespace AND workflow = :workflow AND receipt = :receipt

-- name: done
DELETE FROM durably_workflow_queue
WHERE namespace = :namespace AND workflow = :workflow AND receipt = :receipt

-- name: cancel
DELETE FROM durably_workflow_queue WHERE namespace = :namespace AND workflow = :workflow
