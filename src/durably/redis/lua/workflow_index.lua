-- Keep the status index (ordered by workflow id, byte order = code-point order) and the
-- workflow's catalog entry (its status lines and the counts) in step.
-- KEYS: the index of every status, the catalog, the counts of every tenant.
-- ARGV: index prefix, workflow, new status or '' (gone), then every status
local prefix, workflow, status = ARGV[1], ARGV[2], ARGV[3]
for i = 4, #ARGV do redis.call('ZREM', prefix .. ARGV[i], workflow) end
if status == '' then
  redis.call('ZREM', KEYS[1], workflow)
else
  redis.call('ZADD', KEYS[1], 0, workflow)
  redis.call('ZADD', prefix .. status, 0, workflow)
end
local stored = redis.call('HGET', KEYS[2], workflow)
if not stored then return 1 end
local entry = cjson.decode(stored)
if entry.s == status then return 1 end
local old = cjson.encode({entry.k, entry.s})
redis.call('HINCRBY', KEYS[3], old, -1)
redis.call('HINCRBY', entry.ct, old, -1)
redis.call('ZREM', entry.sp .. entry.s, entry.m)
redis.call('ZREM', entry.tsp .. entry.s, entry.m)
if status == '' then
  for _, line in ipairs(entry.l) do redis.call('ZREM', line, entry.m) end
  redis.call('HDEL', KEYS[2], workflow)
  return 1
end
entry.s = status
local new = cjson.encode({entry.k, status})
redis.call('HINCRBY', KEYS[3], new, 1)
redis.call('HINCRBY', entry.ct, new, 1)
redis.call('ZADD', entry.sp .. status, 0, entry.m)
redis.call('ZADD', entry.tsp .. status, 0, entry.m)
redis.call('HSET', KEYS[2], workflow, cjson.encode(entry))
return 1
