-- What `migrate` runs besides the schema: renames from an earlier layout, and drops of
-- indexes it no longer keeps. {old} is a schema-qualified, quoted name; {new} a bare,
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
