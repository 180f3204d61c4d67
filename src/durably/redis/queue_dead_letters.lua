-- Dead letters, oldest enqueued first, optionally of one queue: one tenant's, or every
-- tenant's.
-- KEYS: the tenant's dead-letter set, or (every tenant) the set of queue names.
-- ARGV: prefix, limit, queue or '', 'tenant' or 'all'
local limit, queue = tonumber(ARGV[2]), ARGV[3]
local out = {}
if ARGV[4] == 'all' then
  -- The oldest `limit` of each queue's dead set, merged by enqueue order (then by ref).
  local queues = queue ~= '' and {queue} or redis.call('SMEMBERS', KEYS[1])
  local found = {}
  for _, q in ipairs(queues) do
    local refs = redis.call('ZRANGE', qkey('dead', q), 0, limit - 1, 'WITHSCORES')
    for i = 1, #refs, 2 do found[#found + 1] = {tonumber(refs[i + 1]), refs[i]} end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  for i = 1, math.min(limit, #found) do out[i] = read_item(item_key(found[i][2])) end
  return out
end
local start = 0
while #out < limit do
  local refs = redis.call('ZRANGE', KEYS[1], start, start + 99)
  if #refs == 0 then break end
  for _, ref in ipairs(refs) do
    local f = read_item(item_key(ref))
    if queue == '' or f[QUEUE] == queue then
      out[#out + 1] = f
      if #out >= limit then break end
    end
  end
  start = start + 100
end
return out
