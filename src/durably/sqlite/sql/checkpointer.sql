-- Workflow records, claims and statuses. Times here are the store's clock (:now), read once
-- per transaction from SQLite itself; each operation runs inside BEGIN IMMEDIATE.

-- name: load
SELECT key, value FROM durably_workflow_checkpoint WHERE workflow = :workflow ORDER BY position

-- name: history
SELECT key, value, written_at FROM durably_workflow_checkpoint
WHERE workflow = :workflow ORDER BY position

-- name: get_record
SELECT value FROM durably_workflow_checkpoint WHERE workflow = :workflow AND key = :key

-- name: insert_record
-- First writer wins: a recorded key is never overwritten.
INSERT INTO durably_workflow_checkpoint (workflow, key, value, written_at)
VALUES (:workflow, :key, :value, :now)
ON CONFLICT (workflow, key) DO NOTHING

-- name: next_inbox_position
INSERT INTO durably_workflow_inbox (workflow, position) VALUES (:workflow, 1)
ON CONFLICT (workflow) DO UPDATE SET position = position + 1
RETURNING position

-- name: delete_records
DELETE FROM durably_workflow_checkpoint WHERE workflow = :workflow

-- name: get_claim
SELECT token, held_until, alive_until, alive_for FROM durably_workflow_claim
WHERE workflow = :workflow

-- name: take_claim
-- The caller checked that no live claim exists (alive_until <= now) under the write lock.
INSERT INTO durably_workflow_claim (workflow, token, held_until, alive_until, alive_for)
VALUES (:workflow, :token, :held_until, :alive_until, :alive_for)
ON CONFLICT (workflow) DO UPDATE
SET token = excluded.token, held_until = excluded.held_until,
    alive_until = excluded.alive_until, alive_for = excluded.alive_for

-- name: renew_claim
-- Liveness never outlasts the budget.
UPDATE durably_workflow_claim
SET alive_until = MIN(:now + :alive, held_until)
WHERE workflow = :workflow AND token = :token AND held_until > :now

-- name: extend_claim
-- The budget never shrinks; then liveness is renewed within it.
UPDATE durably_workflow_claim
SET held_until = MAX(held_until, :now + :budget),
    alive_until = MIN(:now + :alive, MAX(held_until, :now + :budget))
WHERE workflow = :workflow AND token = :token

-- name: touch_claim
-- A successful write renews liveness for the claim's own window.
UPDATE durably_workflow_claim
SET alive_until = MIN(:now + alive_for, held_until)
WHERE workflow = :workflow AND token = :token

-- name: release_claim
UPDATE durably_workflow_claim SET held_until = :now, alive_until = :now
WHERE workflow = :workflow AND token = :token

-- name: fence_claim
-- Discard raises the fence: the holder is superseded and the claim is free.
UPDATE durably_workflow_claim
SET token = token + 1, held_until = :now, alive_until = :now
WHERE workflow = :workflow

-- name: set_status
INSERT INTO durably_workflow_status (workflow, status, attempts, last_error, updated_at)
VALUES (:workflow, :status, :attempts, :last_error, :now)
ON CONFLICT (workflow) DO UPDATE
SET status = excluded.status, attempts = excluded.attempts,
    last_error = excluded.last_error, updated_at = excluded.updated_at

-- name: follow_run
-- The run record following workflow :workflow (its metadata names it) in the workflow's
-- catalogued tenant takes run state :state, unless it holds it already: a new version, the
-- record's own time kept. The run totals move with it (the runs' update trigger).
UPDATE durably_runs
SET state = :state, version = version + 1,
    record = json_set(record, '$.state', :state, '$.version', version + 1)
WHERE json_extract(record, '$.metadata.durably_workflow') = :workflow
  AND tenant = (SELECT tenant FROM durably_workflow_catalog WHERE workflow = :workflow)
  AND state <> :state

-- name: get_status
SELECT workflow, status, attempts, last_error, updated_at FROM durably_workflow_status
WHERE workflow = :workflow

-- name: list_status
-- SQLite's BINARY collation compares UTF-8 bytes: code-point order.
SELECT workflow, status, attempts, last_error, updated_at FROM durably_workflow_status
WHERE (:status IS NULL OR status = :status) AND (:after IS NULL OR workflow > :after)
ORDER BY workflow
LIMIT :limit

-- name: workflows
SELECT workflow FROM durably_workflow_checkpoint WHERE (:after IS NULL OR workflow > :after)
UNION
SELECT workflow FROM durably_workflow_status WHERE (:after IS NULL OR workflow > :after)
ORDER BY workflow
LIMIT :limit

-- name: delete_status
DELETE FROM durably_workflow_status WHERE workflow = :workflow

-- name: peek
SELECT key, value FROM durably_workflow_checkpoint
WHERE workflow = :workflow AND key IN (SELECT value FROM json_each(:keys))

-- name: look
-- The status (the row whose part is 0, if any) and the records under the keys asked, in
-- one statement: one snapshot.
SELECT 0 AS part, workflow, status, attempts, last_error, updated_at, NULL AS key,
       NULL AS value
FROM durably_workflow_status WHERE workflow = :workflow
UNION ALL
SELECT 1, NULL, NULL, NULL, NULL, NULL, key, value FROM durably_workflow_checkpoint
WHERE workflow = :workflow AND key IN (SELECT value FROM json_each(:keys))

-- name: forget_records
DELETE FROM durably_workflow_checkpoint
WHERE workflow = :workflow AND key IN (SELECT value FROM json_each(:keys))

-- name: restart_records
-- Every record but the one about to be rewritten and those under a kept prefix (the
-- records are qualified: json_each has a column named key too).
DELETE FROM durably_workflow_checkpoint AS c
WHERE c.workflow = :workflow AND c.key <> :key AND NOT EXISTS (
    SELECT 1 FROM json_each(:keep) AS p WHERE substr(c.key, 1, length(p.value)) = p.value
)

-- name: delete_record
DELETE FROM durably_workflow_checkpoint WHERE workflow = :workflow AND key = :key

-- Admission (durably.stores.admission): a workflow counted under its tenant, and the
-- counts per tenant, moved in the same transaction as the writes that move them.

-- name: tenant_counts
SELECT running, started FROM durably_workflow_tenant_counts WHERE tenant = :tenant;

-- name: admit
INSERT INTO durably_workflow_admitted (workflow, tenant, running)
VALUES (:workflow, :tenant, 1)
ON CONFLICT (workflow) DO NOTHING;

-- name: count_admitted
INSERT INTO durably_workflow_tenant_counts (tenant, running, started) VALUES (:tenant, 1, 1)
ON CONFLICT (tenant) DO UPDATE SET running = running + 1, started = started + 1;

-- name: flip_running
-- The admitted workflow's running flag, when the status write moves it; no row when it
-- does not (or the workflow was never admitted).
UPDATE durably_workflow_admitted SET running = :running
WHERE workflow = :workflow AND running <> :running
RETURNING tenant;

-- name: move_running
UPDATE durably_workflow_tenant_counts SET running = running + :delta WHERE tenant = :tenant;

-- name: unadmit
DELETE FROM durably_workflow_admitted WHERE workflow = :workflow RETURNING tenant, running;

-- name: uncount
UPDATE durably_workflow_tenant_counts SET running = running - :running, started = started - 1
WHERE tenant = :tenant;

-- name: look_many
-- For each workflow named in :workflows (a JSON array): its status (the rows whose part
-- is 0) and its records under the keys (:keys) or starting with a prefix (:prefixes)
-- asked, in one statement: one snapshot.
WITH asked AS (SELECT DISTINCT value AS workflow FROM json_each(:workflows))
SELECT 0 AS part, s.workflow, s.status, s.attempts, s.last_error, s.updated_at, NULL AS key,
       NULL AS value
FROM durably_workflow_status AS s JOIN asked ON s.workflow = asked.workflow
UNION ALL
SELECT 1, c.workflow, NULL, NULL, NULL, NULL, c.key, c.value
FROM durably_workflow_checkpoint AS c JOIN asked ON c.workflow = asked.workflow
WHERE c.key IN (SELECT value FROM json_each(:keys))
   OR EXISTS (
       SELECT 1 FROM json_each(:prefixes) AS p
       WHERE substr(c.key, 1, length(p.value)) = p.value
   )
