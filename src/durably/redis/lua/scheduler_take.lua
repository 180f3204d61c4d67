-- Hand out the visible ready entry with the earliest visible_at (ties by workflow id).
-- KEYS: ready. ARGV: prefix, lease (us)
-- Returns {workflow, receipt}, or {'', microseconds until the next entry is visible or ''}.
local now = now_us()
local hit = redis.call('ZRANGEBYSCORE', ready, '-inf', fmt(now), 'LIMIT', 0, 1)
if not hit[1] then
  local next = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
  return {'', next[2] and fmt(math.max(0, tonumber(next[2]) - now)) or ''}
end
local workflow = hit[1]
local receipt = fmt(redis.call('INCR', prefix .. 'receipt-seq')) .. '.' .. fmt(now)
redis.call('ZADD', ready, fmt(now + tonumber(ARGV[2])), workflow)
redis.call('HSET', receipts, workflow, receipt)
redis.call('HSET', taken, workflow, fmt(now))
return {workflow, receipt}
