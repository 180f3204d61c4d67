-- Write a record under the fence. KEYS: claim, token, records, written, seq, status.
-- ARGV: token, key, encoded value, ttl (ms)
-- The claim hash, while it exists, carries the current token (only a claim or an extend by
-- the current token writes it; release and discard delete it), so one read of it both
-- fences and renews; without it, the token key decides (and there is nothing to renew).
local c = redis.call('HMGET', KEYS[1], 'token', 'held_until', 'alive_for')
if c[1] then
  if tonumber(c[1]) ~= tonumber(ARGV[1]) then return {'fenced'} end
elseif current_token(KEYS[2]) ~= tonumber(ARGV[1]) then
  return {'fenced'}
end
local now = now_us()
local result = insert(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], now)
if c[1] then
  redis.call('HSET', KEYS[1], 'alive_until', fmt(math.min(now + tonumber(c[3]), tonumber(c[2]))))
end
rearm(ARGV[4], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
-- A first write answers without echoing the value the caller already has.
if result[2] == 1 then return {'ok', '', 1} end
return {'ok', result[1], 0}
