-- Hand out the first queued workflow in the fairness order: the first fresh tenant (turn
-- 0), else the rota's lowest turn; within it the workflow visible longest (ties by id).
-- Hand-outs whose lease lapsed first rejoin their tenants' lines (at most ARGV[4]).
-- KEYS: legacy ready set. ARGV: prefix, default tenant, lease (us), lapsed at most
-- Returns {workflow, receipt}, or {'', microseconds until the next entry is visible or ''}.
local now = now_us()
local lapsed = redis.call('ZRANGEBYSCORE', in_flight, '-inf', fmt(now), 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[4]))
for i = 1, #lapsed, 2 do
  local workflow = lapsed[i]
  redis.call('ZREM', in_flight, workflow)
  redis.call('HDEL', receipts, workflow)
  redis.call('HDEL', taken, workflow)
  place(owner(workflow), workflow, tonumber(lapsed[i + 1]))
end
while true do
  local tenant
  local first_fresh = redis.call('ZRANGE', fresh, 0, 0)[1]
  if first_fresh then
    tenant = string.sub(first_fresh, string.find(first_fresh, '\0', 1, true) + 1)
  else
    tenant = redis.call('ZRANGE', rota, 0, 0)[1]
  end
  if not tenant then
    local next = redis.call('ZRANGE', in_flight, 0, 0, 'WITHSCORES')
    return {'', next[2] and fmt(math.max(0, tonumber(next[2]) - now)) or ''}
  end
  local mine = line(tenant)
  local workflow = redis.call('ZRANGE', mine, 0, 0)[1]
  if workflow then
    redis.call('ZREM', mine, workflow)
    local turn = redis.call('INCR', prefix .. 'turn')
    redis.call('HSET', turns, tenant, turn)
    if first_fresh then
      redis.call('ZREM', fresh, first_fresh)
      redis.call('HDEL', fresh_of, tenant)
    end
    if redis.call('EXISTS', mine) == 1 then
      redis.call('ZADD', rota, turn, tenant)
    else
      redis.call('ZREM', rota, tenant)
    end
    local receipt = fmt(redis.call('INCR', prefix .. 'receipt-seq')) .. '.' .. fmt(now)
    redis.call('ZADD', in_flight, fmt(now + tonumber(ARGV[3])), workflow)
    redis.call('HSET', receipts, workflow, receipt)
    redis.call('HSET', taken, workflow, fmt(now))
    return {workflow, receipt}
  end
  -- Only a store changed outside these scripts leaves a tenant placed with an empty line.
  settle(tenant)
end
