-- One queue's counts in one snapshot. KEYS: the queue's active-tenant set (every tenant
-- with a queued item, due or delayed). ARGV: prefix, queue, now, then the priorities.
-- Depth and the oldest due item are read from the tenants' ready sets here rather than
-- kept up to date on every enqueue and claim: O(active tenants x priorities) per call.
local queue, now = ARGV[2], tonumber(ARGV[3])
local depth, oldest = 0, nil
for _, tenant in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  for p = 4, #ARGV do
    local ready = ready_key(queue, tenant, ARGV[p])
    depth = depth + redis.call('ZCARD', ready)
    local first = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
    if first[2] then
      local at = tonumber(first[2])
      if at <= now and (oldest == nil or at < tonumber(oldest)) then oldest = first[2] end
    end
  end
end
local counters = redis.call('HMGET', qkey('stats', queue), 'reaped', 'duplicates')
return {
  depth,
  redis.call('ZCARD', qkey('leases', queue)),
  redis.call('ZCARD', qkey('dead', queue)),
  oldest or '',
  counters[1] or '0',
  counters[2] or '0',
}
