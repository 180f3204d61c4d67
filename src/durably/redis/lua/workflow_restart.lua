-- Begin a workflow afresh under the fence: delete every record but the rewritten one and
-- those under a kept prefix, write the rewritten one at the next position, report the
-- status (PENDING, no attempts, no error) and renew the holder, in one step.
-- KEYS: claim, token, records, written, seq, status, admitted.
-- ARGV: token, key, encoded value, status, ttl (ms), then the kept prefixes.
-- Answers {deleted, tenant, running delta, the status's time} (flip_admitted: it runs
-- again), or {-1} when fenced (nothing changed).
if current_token(KEYS[2]) ~= tonumber(ARGV[1]) then return {-1} end
local now = now_us()
local deleted = 0
for _, name in ipairs(redis.call('HKEYS', KEYS[3])) do
  local kept = name == ARGV[2]
  for i = 6, #ARGV do
    if not kept and string.sub(name, 1, #ARGV[i]) == ARGV[i] then kept = true end
  end
  if not kept then
    redis.call('HDEL', KEYS[3], name)
    redis.call('HDEL', KEYS[4], name)
    deleted = deleted + 1
  end
end
redis.call('HDEL', KEYS[3], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
insert(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], now)
touch(KEYS[1], ARGV[1], now)
redis.call('HSET', KEYS[6], 'status', ARGV[4], 'attempts', '0', 'has_error', '0',
  'error', '', 'updated_at', fmt(now))
local moved = flip_admitted(KEYS[7], '1')
rearm(ARGV[5], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return {deleted, moved[1], moved[2], fmt(now)}
