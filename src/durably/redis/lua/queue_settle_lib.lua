-- Shared by the scripts that settle a held item (prepended after queue_lib.lua). Kept
-- apart so the hot enqueue and claim scripts do not define what they never call.
-- Why the caller does not hold the item read as ``f``, or false if it does.
-- Returns {reason, holder} with reason 'missing' | 'taken' | 'expired' | 'capped'.
local function not_held(f, worker, now, cap_seconds)
  -- A completed item is kept a while for reading only: to its holders it is gone.
  if not f[STATE] or f[STATE] == 'completed' then return {'missing', ''} end
  if f[STATE] ~= 'claimed' or f[WORKER] ~= worker then
    return {'taken', f[STATE] == 'claimed' and f[WORKER] or ''}
  end
  if cap_seconds and now - tonumber(f[CLAIMED]) >= cap_seconds then
    return {'capped', worker}
  end
  if tonumber(f[LEASE]) <= now then return {'expired', worker} end
  return false
end

-- Count an item of ``queue`` finished at ``now`` ('c' completed, 'f' dead-lettered) in its
-- minute of the queue's throughput ring (durably.stores.throughput): fields '<slot>:m'
-- (the minute the slot counts), '<slot>:c' and '<slot>:f' of one hash.
local function count_finished(queue, now, field)
  local minute = math.floor(now / 60)
  local slot = minute % 16
  local key = qkey('rate', queue)
  local held = tonumber(redis.call('HGET', key, slot .. ':m') or '-1')
  if held > minute then return end  -- late for a minute the slot has moved past
  if held < minute then
    redis.call('HSET', key, slot .. ':m', minute, slot .. ':c', 0, slot .. ':f', 0)
  end
  redis.call('HINCRBY', key, slot .. ':' .. field, 1)
end

-- The requeue instants (as ``settle`` takes them) of a lapsed or given-back item read as
-- ``f``: by the retry policy its payload carries (durably.stores.work.ITEM_RETRY_FIELD,
-- [max_attempts, initial, maximum, multiplier], waits as QueuePolicy.backoff_for reckons
-- them), else the queue's ``due``. Only the entry its next attempt reads is meaningful.
local function carried_due(f, due, now, immediate)
  local read, payload = pcall(cjson.decode, f[PAYLOAD] or '')
  if not read or type(payload) ~= 'table' or type(payload.retry) ~= 'string' then
    return due
  end
  local parsed, r = pcall(cjson.decode, payload.retry)
  if not parsed or type(r) ~= 'table' then return due end
  local most, initial, cap, grow = tonumber(r[1]), tonumber(r[2]), tonumber(r[3]), tonumber(r[4])
  if not (most and initial and cap and grow) or most < 1 or grow < 1 then return due end
  local attempts = (tonumber(f[ATTEMPTS]) or 0) + 1
  if attempts >= most then return {} end
  local wait = 0
  if not immediate then
    wait = math.min(math.max(initial, 1e-6) * grow ^ math.min(attempts - 1, 1024),
      math.max(cap, 1e-6))
  end
  local at, instants = string.format('%.17g', now + wait), {}
  for n = 1, attempts do instants[n] = at end
  return instants
end

-- Apply one failed attempt to the claimed item read as ``f``. ``due`` lists, per attempt
-- count after this failure, the instant the policy requeues at; a count beyond the list is
-- a dead letter. Returns ``f`` as it now stands.
local function settle(ref, f, error, due, now)
  local item = item_key(ref)
  local queue, tenant = f[QUEUE], f[TENANT]
  local attempts = (tonumber(f[ATTEMPTS]) or 0) + 1
  redis.call('ZREM', qkey('leases', queue), ref)
  redis.call('SREM', base .. 'held:' .. seg(f[WORKER]), ref)
  release_gate(f)
  local failures = (f[FAILURES] or '') .. seg(error)
  if attempts > #due then
    redis.call('HSET', item, 'state', 'dead_lettered', 'attempts', attempts, 'worker', '',
      'lease_expires_at', '', 'claimed_at', '', 'failures', failures)
    local order = tonumber(string.sub(f[MEMBER], 1, 16))
    redis.call('ZADD', qkey('dead', queue), order, ref)
    redis.call('ZADD', base .. 'dead-tenant:' .. seg(tenant), order, ref)
    finish_dedupe(f, now)
    count_finished(queue, now, 'f')
    f[STATE] = 'dead_lettered'
  else
    local at = due[attempts]
    redis.call('HSET', item, 'state', 'queued', 'attempts', attempts, 'worker', '',
      'lease_expires_at', '', 'claimed_at', '', 'available_at', at, 'failures', failures)
    add_ready(queue, tenant, f[PRIORITY], f[MEMBER], at, now)
    if tonumber(at) <= now then ring(queue, at) end
    f[STATE], f[AVAILABLE] = 'queued', at
  end
  f[ATTEMPTS], f[WORKER], f[LEASE], f[CLAIMED], f[FAILURES] = attempts, '', '', '', failures
  return f
end

-- Finish ``worker``'s item ``ref`` as of ``now`` (queue_complete.lua, and each of
-- queue_complete_many.lua's): {'ok', f} with the item as it now stands, or why the worker
-- does not hold it (see not_held). A finished item stays readable for ``retention``
-- seconds, then frees its memory.
local function complete(ref, worker, now, retention)
  local item = item_key(ref)
  local f = read_item(item)
  local lost = not_held(f, worker, now, nil)
  if lost then return lost end
  redis.call('ZREM', qkey('leases', f[QUEUE]), ref)
  redis.call('SREM', base .. 'held:' .. seg(worker), ref)
  release_gate(f)
  redis.call('HSET', item, 'state', 'completed', 'lease_expires_at', '')
  count_finished(f[QUEUE], now, 'c')
  -- A finished item whose dedupe key is kept stays readable as long as the key.
  local ttl = finish_dedupe(f, now)
  redis.call('EXPIRE', item, math.max(tonumber(retention), math.ceil(ttl or 0)))
  f[STATE], f[LEASE] = 'completed', ''
  return {'ok', f}
end

-- `complete` for each ref in ARGV[first..last], in order: what it returns for each.
local function complete_refs(first, last, worker, now, retention)
  local done = {}
  for i = first, last do done[#done + 1] = complete(ARGV[i], worker, now, retention) end
  return done
end
