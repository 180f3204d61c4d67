-- Finish the holder's item. KEYS: item hash. ARGV: prefix, ref, worker, now, retention
local item, ref, worker, now = KEYS[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local f = read_item(item)
local lost = not_held(f, worker, now, nil)
if lost then return lost end
redis.call('ZREM', qkey('leases', f[QUEUE]), ref)
redis.call('SREM', base .. 'held:' .. seg(worker), ref)
redis.call('HSET', item, 'state', 'completed', 'lease_expires_at', '')
forget_dedupe(f)
-- A finished item stays readable for a while, then frees its memory.
redis.call('EXPIRE', item, ARGV[5])
f[STATE], f[LEASE] = 'completed', ''
return {'ok', f}
