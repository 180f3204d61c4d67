-- Catalogue a workflow unless it is: its entry in the catalog hash, its member in every
-- line (its entry's `l`, then the status lines under the status it reported), the counts
-- (every tenant's, and its tenant's: the entry's `ct`). Answers 1 when it was entered.
local function catalogue(catalog, counts, workflow, stored, status)
  if redis.call('HEXISTS', catalog, workflow) == 1 then return 0 end
  local entry = cjson.decode(stored)
  entry.s = status
  redis.call('HSET', catalog, workflow, cjson.encode(entry))
  for _, line in ipairs(entry.l) do redis.call('ZADD', line, 0, entry.m) end
  redis.call('ZADD', entry.sp .. status, 0, entry.m)
  redis.call('ZADD', entry.tsp .. status, 0, entry.m)
  redis.call('ZADD', entry.ksp .. status, 0, entry.m)
  local field = cjson.encode({entry.k, status})
  redis.call('HINCRBY', counts, field, 1)
  redis.call('HINCRBY', entry.ct, field, 1)
  return 1
end
