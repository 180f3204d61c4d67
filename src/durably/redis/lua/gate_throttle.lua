-- Reserve a start's slot under a throttle key (durably.stores.gates.throttled_until, the
-- same arithmetic). KEYS: the key's reserved instant. ARGV: now, interval, burst (seconds).
-- Answers when the start may begin, as text.
local now, interval = tonumber(ARGV[1]), tonumber(ARGV[2])
local tolerance = (tonumber(ARGV[3]) - 1) * interval
local stored = redis.call('GET', KEYS[1])
local current = stored and tonumber(stored) or now + tolerance
local begins = math.max(now, current - tolerance)
redis.call('SET', KEYS[1], string.format('%.17g', math.max(current, now) + interval))
return string.format('%.17g', begins)
