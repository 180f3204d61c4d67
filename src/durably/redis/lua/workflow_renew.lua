-- Push the holder's liveness window out, never past its budget.
-- KEYS: claim, token. ARGV: token, alive (us)
if current_token(KEYS[2]) ~= tonumber(ARGV[1]) then return 0 end
local c = redis.call('HMGET', KEYS[1], 'token', 'held_until')
local now = now_us()
if not c[1] or tonumber(c[1]) ~= tonumber(ARGV[1]) or tonumber(c[2]) <= now then return 0 end
redis.call('HSET', KEYS[1], 'alive_until', fmt(math.min(now + tonumber(ARGV[2]), tonumber(c[2]))))
return 1
