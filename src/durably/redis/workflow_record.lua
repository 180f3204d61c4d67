-- Write a record under the fence. KEYS: the workflow's key prefix (its claim, token,
-- records, written, seq and status keys are built from it: one slot, fewer arguments).
-- ARGV: token, key, encoded value, then the ttl (ms) if there is one
-- Answers 1 for a first write (the caller has the value), 0 when fenced, and otherwise
-- the value stored before (this write lost).
local p = KEYS[1]
local claim = p .. 'claim'
-- The claim hash, while it exists, carries the current token (only a claim or an extend by
-- the current token writes it; release and discard delete it), so one read of it both
-- fences and renews; without it, the token key decides (and there is nothing to renew).
local c = redis.call('HMGET', claim, 'token', 'held_until', 'alive_for')
if c[1] then
  if tonumber(c[1]) ~= tonumber(ARGV[1]) then return 0 end
elseif current_token(p .. 'token') ~= tonumber(ARGV[1]) then
  return 0
end
local now = now_us()
local result = insert(p .. 'records', p .. 'written', p .. 'seq', ARGV[2], ARGV[3], now)
if c[1] then
  redis.call('HSET', claim, 'alive_until', fmt(math.min(now + tonumber(c[3]), tonumber(c[2]))))
end
if ARGV[4] then
  rearm(ARGV[4], p .. 'token', p .. 'records', p .. 'written', p .. 'seq', p .. 'status')
end
if result[2] == 1 then return 1 end
return result[1]
