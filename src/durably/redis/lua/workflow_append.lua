-- Append a message under a key named from the workflow's position counter, which discard
-- keeps, so an inbox key is never reused. KEYS: records, written, seq, token, status.
-- ARGV: encoded value, inbox prefix, digits, ttl (ms), then the finished statuses when
-- the append is refused for a finished workflow (read here, in the same script).
-- Answers {position, key}, or {'finished', status} (nothing written).
if #ARGV > 4 then
  local status = redis.call('HGET', KEYS[5], 'status')
  for i = 5, #ARGV do
    if status == ARGV[i] then return {'finished', status} end
  end
end
local position = redis.call('INCR', KEYS[3])
local key = ARGV[2] .. string.format('%0' .. ARGV[3] .. '.0f', position)
redis.call('HSET', KEYS[1], key, ARGV[1])
redis.call('HSET', KEYS[2], key, fmt(position) .. ':' .. fmt(now_us()))
rearm(ARGV[4], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
announce(KEYS[1], 'r')
return {fmt(position), key}
