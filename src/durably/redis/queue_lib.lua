-- Shared by every queue script (prepended at load). ARGV[1] is always the queue prefix
-- (it carries the namespace hash tag, so every key built here lives in the same slot).
local base = ARGV[1]
local function seg(s) return #s .. ':' .. s end
local function qkey(kind, queue) return base .. kind .. ':' .. seg(queue) end
local function ready_key(queue, tenant, priority)
  return base .. 'ready:' .. seg(queue) .. seg(tenant) .. ':' .. priority
end
local function item_key(ref) return base .. 'item:' .. ref end

local function ring(queue)
  -- The doorbell an idle worker blocks on; bounded so nobody has to drain it.
  local bell = qkey('bell', queue)
  redis.call('LPUSH', bell, '1')
  redis.call('LTRIM', bell, 0, 63)
end

local function add_ready(queue, tenant, priority, member, ref, available)
  redis.call('ZADD', ready_key(queue, tenant, priority), available, member)
  redis.call('ZADD', qkey('all', queue), available, ref)
  if redis.call('HINCRBY', qkey('count', queue), tenant, 1) == 1 then
    local turn = redis.call('HGET', qkey('turns', queue), tenant) or 0
    redis.call('ZADD', qkey('active', queue), turn, tenant)
  end
end

local function remove_ready(queue, tenant, priority, member, ref)
  redis.call('ZREM', ready_key(queue, tenant, priority), member)
  redis.call('ZREM', qkey('all', queue), ref)
  if redis.call('HINCRBY', qkey('count', queue), tenant, -1) <= 0 then
    redis.call('HDEL', qkey('count', queue), tenant)
    redis.call('ZREM', qkey('active', queue), tenant)
  end
end

local function forget_dedupe(item)
  local f = redis.call('HMGET', item, 'dedupe', 'tenant', 'queue', 'id')
  if f[1] and f[1] ~= '' then
    local field = seg(f[2]) .. seg(f[3]) .. seg(f[1])
    if redis.call('HGET', base .. 'dedupe', field) == f[4] then
      redis.call('HDEL', base .. 'dedupe', field)
    end
  end
end

-- Why the caller does not hold the item, or false if it does.
-- Returns {reason, holder} with reason 'missing' | 'taken' | 'expired' | 'capped'.
local function not_held(item, worker, now, cap_seconds)
  local f = redis.call('HMGET', item, 'state', 'worker', 'lease_expires_at', 'claimed_at')
  if not f[1] then return {'missing', ''} end
  if f[1] ~= 'claimed' or f[2] ~= worker then
    return {'taken', f[1] == 'claimed' and f[2] or ''}
  end
  if cap_seconds and now - tonumber(f[4]) >= cap_seconds then return {'capped', worker} end
  if tonumber(f[3]) <= now then return {'expired', worker} end
  return false
end

-- Apply one failed attempt. ``due`` lists, per attempt count after this failure, the
-- instant the policy requeues at; a count beyond the list is a dead letter.
local function settle(ref, error, due, now)
  local item = item_key(ref)
  local f = redis.call('HMGET', item, 'queue', 'tenant', 'priority', 'member', 'worker',
    'attempts', 'failures')
  local queue, tenant = f[1], f[2]
  local attempts = tonumber(f[6]) + 1
  redis.call('ZREM', qkey('leases', queue), ref)
  redis.call('SREM', base .. 'held:' .. seg(f[5]), ref)
  local failures = f[7] .. seg(error)
  if attempts > #due then
    redis.call('HSET', item, 'state', 'dead_lettered', 'attempts', attempts, 'worker', '',
      'lease_expires_at', '', 'claimed_at', '', 'failures', failures)
    local order = tonumber(string.sub(f[4], 1, 16))
    redis.call('ZADD', qkey('dead', queue), order, ref)
    redis.call('ZADD', base .. 'dead-tenant:' .. seg(tenant), order, ref)
    forget_dedupe(item)
  else
    local at = due[attempts]
    redis.call('HSET', item, 'state', 'queued', 'attempts', attempts, 'worker', '',
      'lease_expires_at', '', 'claimed_at', '', 'available_at', at, 'failures', failures)
    add_ready(queue, tenant, f[3], f[4], ref, at)
    if tonumber(at) <= now then ring(queue) end
  end
  return redis.call('HGETALL', item)
end
