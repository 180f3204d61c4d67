-- Delete every record and the status, and raise the fence, in one step.
-- KEYS: claim, token, records, written, status
local now = now_us()
local count = redis.call('HLEN', KEYS[3])
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[1])
next_token(KEYS[2], now)
return count
