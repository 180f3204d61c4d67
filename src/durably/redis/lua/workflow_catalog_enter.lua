-- Catalogue a workflow unless it is (workflow_catalog_lib.lua).
-- KEYS: catalog, counts of every tenant, counts of its tenant (the entry's `ct`).
-- ARGV: workflow, entry (JSON: member, lines, status prefixes, tenant counts), status.
return catalogue(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
