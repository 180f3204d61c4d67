-- One queue's counts in one snapshot. KEYS: the queue's set of queued items.
-- ARGV: prefix, queue, now
local queue = ARGV[2]
local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3], 'WITHSCORES',
  'LIMIT', 0, 1)
local counters = redis.call('HMGET', qkey('stats', queue), 'reaped', 'duplicates')
return {
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', qkey('leases', queue)),
  redis.call('ZCARD', qkey('dead', queue)),
  oldest[2] or '',
  counters[1] or '0',
  counters[2] or '0',
}
