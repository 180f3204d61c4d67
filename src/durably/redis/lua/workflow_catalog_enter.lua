-- Catalogue a workflow unless it is: its entry in the catalog hash, its member in every
-- line (the status lines under the status it reported), the counts.
-- KEYS: catalog, counts of every tenant, counts of its tenant.
-- ARGV: workflow, entry (JSON: member, lines, status prefixes), status, counted field
-- prefix, then the lines that do not follow its status.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local entry = cjson.decode(ARGV[2])
entry.s = ARGV[3]
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(entry))
for i = 5, #ARGV do redis.call('ZADD', ARGV[i], 0, entry.m) end
redis.call('ZADD', entry.sp .. entry.s, 0, entry.m)
redis.call('ZADD', entry.tsp .. entry.s, 0, entry.m)
redis.call('ZADD', entry.ksp .. entry.s, 0, entry.m)
local field = cjson.encode({entry.k, entry.s})
redis.call('HINCRBY', KEYS[2], field, 1)
redis.call('HINCRBY', KEYS[3], field, 1)
return 1
