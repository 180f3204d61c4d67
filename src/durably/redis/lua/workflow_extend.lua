-- Grow the holder's budget (never shrink it) and renew. KEYS: claim, token.
-- ARGV: token, budget (us), alive (us)
if current_token(KEYS[2]) ~= tonumber(ARGV[1]) then return 0 end
local now = now_us()
local c = redis.call('HMGET', KEYS[1], 'held_until', 'alive_for')
local held = math.max(tonumber(c[1] or '0'), now + tonumber(ARGV[2]))
hold(KEYS[1], tonumber(ARGV[1]), held, math.min(now + tonumber(ARGV[3]), held),
  c[2] or ARGV[3], now)
return 1
