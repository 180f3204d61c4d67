-- A tenant's dead letters, oldest enqueued first, optionally of one queue.
-- KEYS: the tenant's dead-letter set. ARGV: prefix, limit, queue or ''
local limit, queue = tonumber(ARGV[2]), ARGV[3]
local out = {}
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
