-- What `migrate` runs besides the schema: renames from an earlier layout, drops of
-- indexes it no longer keeps, and the upgrade of the run records that follow a workflow. {old} is a schema-qualified, quoted name; {new} a bare,
-- quoted one (RENAME TO stays in the schema).

-- name: relation_exists
SELECT to_regclass($1) IS NOT NULL;

-- name: rename_table
ALTER TABLE {old} RENAME TO {new};

-- name: rename_sequence
ALTER SEQUENCE {old} RENAME TO {new};

-- name: rename_index
ALTER INDEX {old} RENAME TO {new};

-- name: drop_index
DROP INDEX IF EXISTS {old};

-- name: stored_version
SELECT min(version) FROM {schema_version};

-- name: follow_runs
-- The upgrade to version 7: each run record following a catalogued workflow takes the run
-- state of the workflow's status ($1 maps status to run state), as every status write
-- stores it from then on.
UPDATE {runs} AS r
SET state = m.value, version = r.version + 1,
    body = jsonb_set(r.body, ARRAY['state'], to_jsonb(m.value))
FROM {workflow_catalog} AS c
JOIN {workflow_status} AS s ON s.workflow = c.workflow
JOIN jsonb_each_text($1::jsonb) AS m ON m.key = s.status
WHERE r.tenant = c.tenant COLLATE "default"
  AND r.body -> 'metadata' ->> 'durably_workflow' = c.workflow COLLATE "default"
  AND r.state <> m.value;
