-- Write a record under the fence. KEYS: the workflow's key prefix (its claim, token,
-- records, written, seq and status keys are built from it: one slot, fewer arguments).
-- ARGV: token, key, encoded value, whether a first write is announced ('1' or '0': a
-- record nobody waits for is not, as every subscriber reads every message), then the
-- ttl (ms) if there is one.
-- Answers 1 for a first write (the caller has the value), 0 when fenced, and otherwise
-- the value stored before (this write lost). Written out flat, without the workflow
-- prelude: each helper closure and call costs server time on every record.
local p, token, key = KEYS[1], ARGV[1], ARGV[2]
local claim = p .. 'claim'
-- The claim hash, while it exists, carries the current token (only a claim or an extend by
-- the current token writes it; release and discard delete it), so one read of it both
-- fences and renews; without it, the token key decides (and there is nothing to renew;
-- with no token key no pass was ever handed out, so none matches).
-- Tokens are compared as the canonical decimal text both sides write.
local c = redis.call('HMGET', claim, 'token', 'held_until', 'alive_for', 'alive_until')
if c[1] then
  if c[1] ~= token then return 0 end
elseif redis.call('GET', p .. 'token') ~= token then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local records = p .. 'records'
local first = redis.call('HSETNX', records, key, ARGV[3]) == 1
if first then
  -- First writer wins: the record lands at the next position, at the server's time.
  local position = redis.call('INCR', p .. 'seq')
  redis.call('HSET', p .. 'written', key, string.format('%.0f:%.0f', position, now))
end
if c[1] then
  -- A sign of life: renew the window, never past the budget; a window already at the
  -- budget is left as it is (the write would change nothing).
  local alive = math.min(now + tonumber(c[3]), tonumber(c[2]))
  if alive ~= tonumber(c[4]) then
    redis.call('HSET', claim, 'alive_until', string.format('%.0f', alive))
  end
end
if ARGV[5] then
  for _, name in ipairs({'token', 'records', 'written', 'seq', 'status'}) do
    redis.call('PEXPIRE', p .. name, ARGV[5])
  end
end
if first then
  if ARGV[4] == '1' then
    -- Announced as workflow_lib's announce does (this script runs without the prelude).
    local b = string.find(p, '{', 1, true)
    redis.call('PUBLISH', string.sub(p, 1, b - 1) .. 'changes', 'r' .. string.sub(p, b))
  end
  return 1
end
return redis.call('HGET', records, key)
