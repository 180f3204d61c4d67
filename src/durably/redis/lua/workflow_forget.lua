-- Delete named messages under the fence, renewing the holder. KEYS: claim, token,
-- records, written. ARGV: token, ttl (ms), then the keys.
-- Answers the number deleted, or -1 when fenced (nothing deleted).
if current_token(KEYS[2]) ~= tonumber(ARGV[1]) then return -1 end
local deleted = 0
for i = 3, #ARGV do
  deleted = deleted + redis.call('HDEL', KEYS[3], ARGV[i])
  redis.call('HDEL', KEYS[4], ARGV[i])
end
touch(KEYS[1], ARGV[1], now_us())
rearm(ARGV[2], KEYS[2], KEYS[3], KEYS[4])
return deleted
