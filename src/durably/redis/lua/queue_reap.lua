-- Return every lapsed lease to the queue. The read and the settle are one script, so a
-- heartbeat landing meanwhile is either seen (not lapsed) or lands after (and fails).
-- KEYS: the queue registry. ARGV: prefix, now, error, batch, then the requeue instants.
-- Returns the items moved, as they now stand (at most ``batch``).
local now, error, batch = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local due = {}
for i = 5, #ARGV do due[#due + 1] = ARGV[i] end
-- Forget up to ``batch`` kept dedupe keys whose time is up (by expiry), unless a live
-- item has taken the key since.
for _, field in ipairs(redis.call('ZRANGEBYSCORE', base .. 'dedupe-kept', '-inf', ARGV[2],
    'LIMIT', 0, batch)) do
  local id = redis.call('HGET', base .. 'dedupe', field)
  if id then
    local colon = string.find(field, ':', 1, true)
    local tenant = string.sub(field, 1, colon + tonumber(string.sub(field, 1, colon - 1)))
    local state = redis.call('HGET', item_key(tenant .. seg(id)), 'state')
    if state ~= 'queued' and state ~= 'claimed' then
      redis.call('HDEL', base .. 'dedupe', field)
    end
  end
  redis.call('ZREM', base .. 'dedupe-kept', field)
end
local moved = {}
for _, queue in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local lapsed = redis.call('ZRANGEBYSCORE', qkey('leases', queue), '-inf', ARGV[2],
    'LIMIT', 0, batch - #moved)
  for _, ref in ipairs(lapsed) do
    local f = read_item(item_key(ref))
    moved[#moved + 1] = settle(ref, f, error, carried_due(f, due, now, false), now)
    redis.call('HINCRBY', qkey('stats', queue), 'reaped', 1)
  end
  if #moved >= batch then break end
end
return moved
