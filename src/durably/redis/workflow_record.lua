-- Write a record under the fence. KEYS: claim, token, records, written, seq, status.
-- ARGV: token, key, encoded value, ttl (ms)
if current_token(KEYS[2]) ~= tonumber(ARGV[1]) then return {'fenced'} end
local now = now_us()
local result = insert(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], now)
touch(KEYS[1], ARGV[1], now)
rearm(ARGV[4], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return {'ok', result[1], result[2]}
