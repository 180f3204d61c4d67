-- First-writer-wins write from outside any pass. KEYS: records, written, seq, token, status.
-- ARGV: key, encoded value, ttl (ms)
local result = insert(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], now_us())
rearm(ARGV[3], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
if result[2] == 1 then announce(KEYS[1], 'r') end
return result
