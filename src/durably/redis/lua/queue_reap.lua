-- Return every lapsed lease to the queue. The read and the settle are one script, so a
-- heartbeat landing meanwhile is either seen (not lapsed) or lands after (and fails).
-- KEYS: the queue registry. ARGV: prefix, now, error, batch, then the requeue instants.
-- Returns the items moved, as they now stand (at most ``batch``).
local now, error, batch = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local due = {}
for i = 5, #ARGV do due[#due + 1] = ARGV[i] end
local moved = {}
for _, queue in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local lapsed = redis.call('ZRANGEBYSCORE', qkey('leases', queue), '-inf', ARGV[2],
    'LIMIT', 0, batch - #moved)
  for _, ref in ipairs(lapsed) do
    moved[#moved + 1] = settle(ref, read_item(item_key(ref)), error, due, now)
    redis.call('HINCRBY', qkey('stats', queue), 'reaped', 1)
  end
  if #moved >= batch then break end
end
return moved
