-- One queue's counts in one snapshot, from counters and the first of sorted sets (no walk
-- over tenants). KEYS: the queue's rotation set. ARGV: prefix, queue, now, then the
-- priorities. The depth is counted by enqueue, claim and requeue (queue_lib.lua); the
-- oldest due item is the earliest of the tenants' heads, when it is due.
local queue, now = ARGV[2], tonumber(ARGV[3])
if redis.call('EXISTS', qkey('active', queue)) == 1 then relayout(queue, {unpack(ARGV, 4)}) end
local oldest = ''
local first = redis.call('ZRANGE', qkey('heads', queue), 0, 0, 'WITHSCORES')
if first[2] and tonumber(first[2]) <= now then oldest = first[2] end
local counters = redis.call('HMGET', qkey('stats', queue), 'depth', 'reaped', 'duplicates')
return {
  counters[1] or '0',
  redis.call('ZCARD', qkey('leases', queue)),
  redis.call('ZCARD', qkey('dead', queue)),
  oldest,
  counters[2] or '0',
  counters[3] or '0',
}
