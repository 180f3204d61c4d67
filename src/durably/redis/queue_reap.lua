-- Return every lapsed lease to the queue. The read and the settle are one script, so a
-- heartbeat landing meanwhile is either seen (not lapsed) or lands after (and fails).
-- KEYS: the queue registry. ARGV: prefix, now, error, batch, then the requeue instants
local now, error, batch = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local due = {}
for i = 5, #ARGV do due[#due + 1] = ARGV[i] end
local count = 0
for _, queue in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local lapsed = redis.call('ZRANGEBYSCORE', qkey('leases', queue), '-inf', ARGV[2],
    'LIMIT', 0, batch - count)
  for _, ref in ipairs(lapsed) do
    settle(ref, read_item(item_key(ref)), error, due, now)
    redis.call('HINCRBY', qkey('stats', queue), 'reaped', 1)
    count = count + 1
  end
  if count >= batch then break end
end
return count
