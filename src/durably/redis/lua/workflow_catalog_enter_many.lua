-- Catalogue each of a batch of workflows unless it is (workflow_catalog_lib.lua); every
-- key is under the catalog's tag, so one slot holds them all.
-- KEYS: catalog. ARGV: counts of every tenant, then per workflow: workflow, entry (JSON,
-- as workflow_catalog_enter.lua takes it), status.
-- Answers how many it entered.
local entered = 0
for i = 2, #ARGV, 3 do
  entered = entered + catalogue(KEYS[1], ARGV[1], ARGV[i], ARGV[i + 1], ARGV[i + 2])
end
return entered
