-- Keep the status index (ordered by workflow id, byte order = code-point order) and the
-- workflow's catalog entry (its status lines and the counts) in step.
-- A catalogued workflow reaching completed or failed is counted in its kind's minute of
-- the throughput ring (durably.stores.throughput): fields 'm|<slot>|<kind>' (the minute
-- the slot counts), 'c|...' (completed) and 'f|...' (failed) of one hash.
-- KEYS: the index of every status, the catalog, the counts of every tenant, the ring.
-- ARGV: index prefix, workflow, new status or '' (gone), the status's time (microseconds
-- since the epoch, '' when gone), then every status
local prefix, workflow, status = ARGV[1], ARGV[2], ARGV[3]
for i = 5, #ARGV do redis.call('ZREM', prefix .. ARGV[i], workflow) end
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
if status == 'completed' or status == 'failed' then
  local minute = math.floor(tonumber(ARGV[4]) / 60000000)
  local tail = '|' .. (minute % 16) .. '|' .. entry.k
  local held = tonumber(redis.call('HGET', KEYS[4], 'm' .. tail) or '-1')
  if held <= minute then
    if held < minute then
      redis.call('HSET', KEYS[4], 'm' .. tail, minute, 'c' .. tail, 0, 'f' .. tail, 0)
    end
    redis.call('HINCRBY', KEYS[4], (status == 'completed' and 'c' or 'f') .. tail, 1)
  end
end
return 1
