-- The floor's claim: move the first due member of a sorted set into a lease sorted set.
-- KEYS: ready, leases. ARGV: now, lease expiry
local hit = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1)
if not hit[1] then return false end
redis.call('ZREM', KEYS[1], hit[1])
redis.call('ZADD', KEYS[2], ARGV[2], hit[1])
return hit[1]
