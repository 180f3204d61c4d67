-- Extend the holder's lease, never past claimed_at + max_lease_seconds.
-- KEYS: item hash. ARGV: prefix, ref, worker, now, now + lease_seconds, max_lease_seconds
local item, ref, worker, now = KEYS[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local cap = tonumber(ARGV[6])
local f = read_item(item)
local lost = not_held(f, worker, now, cap)
if lost then return lost end
local claimed_at = f[CLAIMED]
local expires = ARGV[5]
if tonumber(expires) > tonumber(claimed_at) + cap then
  -- %.17g renders the double exactly, so the client reads back the same instant.
  expires = string.format('%.17g', tonumber(claimed_at) + cap)
end
redis.call('HSET', item, 'lease_expires_at', expires)
redis.call('ZADD', qkey('leases', f[QUEUE]), expires, ref)
f[LEASE] = expires
return {'ok', f}
