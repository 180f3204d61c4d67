-- Keep the status index (ordered by workflow id, byte order = code-point order) and the
-- workflow's catalog entry (its status lines and the counts) in step.
-- A catalogued workflow reaching completed or failed is counted in its kind's minute of
-- the throughput ring (durably.stores.throughput): fields 'm|<slot>|<kind>' (the minute
-- the slot counts), 'c|...' (completed) and 'f|...' (failed) of one hash.
-- A catalogued entry keeps the time of the status it shows ('u'): a status older than it
-- (a writer whose step came late, a repair that read before a newer write) changes
-- nothing, so the steps may land in any order and the last status written wins. It is
-- kept as text: cjson would round a number of 16 digits.
-- The status write's intents (members of the unindexed set, written before the status)
-- are taken out in the same script: what stays there is a step a process never ran.
-- Answers 0 when a later status is catalogued already, else 1.
-- KEYS: the index of every status, the catalog, the counts of every tenant, the ring,
-- the unindexed intents.
-- ARGV: index prefix, workflow, new status or '' (gone), the status's time (microseconds
-- since the epoch, '' when gone or not known), how many intents n, the n intents, then
-- every status
local prefix, workflow, status, at = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local intents = tonumber(ARGV[5])
for i = 6, 5 + intents do redis.call('ZREM', KEYS[5], ARGV[i]) end
local stored = redis.call('HGET', KEYS[2], workflow)
local entry = stored and cjson.decode(stored)
if entry and at and entry.u and at < tonumber(entry.u) then return 0 end
for i = 6 + intents, #ARGV do redis.call('ZREM', prefix .. ARGV[i], workflow) end
if status == '' then
  redis.call('ZREM', KEYS[1], workflow)
else
  redis.call('ZADD', KEYS[1], 0, workflow)
  redis.call('ZADD', prefix .. status, 0, workflow)
end
if not entry then return 1 end
if entry.s == status then
  if at and (not entry.u or at > tonumber(entry.u)) then
    entry.u = ARGV[4]
    redis.call('HSET', KEYS[2], workflow, cjson.encode(entry))
  end
  return 1
end
local old = cjson.encode({entry.k, entry.s})
redis.call('HINCRBY', KEYS[3], old, -1)
redis.call('HINCRBY', entry.ct, old, -1)
redis.call('ZREM', entry.sp .. entry.s, entry.m)
redis.call('ZREM', entry.tsp .. entry.s, entry.m)
-- ksp: the kind's status lines, absent from entries catalogued before they were kept.
if entry.ksp then redis.call('ZREM', entry.ksp .. entry.s, entry.m) end
if status == '' then
  for _, line in ipairs(entry.l) do redis.call('ZREM', line, entry.m) end
  redis.call('HDEL', KEYS[2], workflow)
  return 1
end
entry.s = status
if at then entry.u = ARGV[4] end
local new = cjson.encode({entry.k, status})
redis.call('HINCRBY', KEYS[3], new, 1)
redis.call('HINCRBY', entry.ct, new, 1)
redis.call('ZADD', entry.sp .. status, 0, entry.m)
redis.call('ZADD', entry.tsp .. status, 0, entry.m)
if entry.ksp then redis.call('ZADD', entry.ksp .. status, 0, entry.m) end
redis.call('HSET', KEYS[2], workflow, cjson.encode(entry))
if at and (status == 'completed' or status == 'failed') then
  local minute = math.floor(at / 60000000)
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
