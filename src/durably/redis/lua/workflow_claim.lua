-- Take the workflow if no live pass holds it. KEYS: claim, token.
-- ARGV: budget (us), alive (us), ttl (ms, 0 = none)
local now = now_us()
local alive_until = redis.call('HGET', KEYS[1], 'alive_until')
if alive_until and tonumber(alive_until) > now then return false end
local token = next_token(KEYS[2], now)
local held = now + tonumber(ARGV[1])
hold(KEYS[1], token, held, math.min(now + tonumber(ARGV[2]), held), ARGV[2], now)
rearm(ARGV[3], KEYS[2])
return fmt(token)
