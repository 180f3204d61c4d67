-- Queue a new item: the common enqueue, nothing held under its id, no dedupe key, no
-- attempts or failures carried. Same arguments as queue_enqueue_full.lua, which the
-- caller runs instead for any other case, and after this answers 0.
-- KEYS: item hash. ARGV: prefix, tenant, member, queue, payload, priority, now, the
-- enqueue's token, then optionally available_at.
-- Answers 1 when queued, or when a retry of this call finds its own token on the item; 0,
-- having written nothing, when something else holds the id.
-- No prelude and no helper calls: this runs on every enqueue, and each closure, call and
-- intermediate string costs server time. The placement below is `place` (queue_lib.lua)
-- written out: keep the two in step.
local item = KEYS[1]
local token = ARGV[8]
if redis.call('HGET', item, 'state') then
  if redis.call('HGET', item, 'enqueue') == token then return 1 end
  return 0
end
local base, tenant, member, queue = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local priority, now, available = ARGV[6], ARGV[7], ARGV[9]
-- Unset fields are not written: a missing availability reads as the enqueue time, missing
-- attempts as 0 (read_item's readers supply both).
if available then
  redis.call('HSET', item, 'payload', ARGV[5], 'tenant', tenant, 'id', string.sub(member, 17),
    'queue', queue, 'priority', priority, 'member', member, 'state', 'queued',
    'enqueued_at', now, 'enqueue', token, 'available_at', available)
else
  available = now
  redis.call('HSET', item, 'payload', ARGV[5], 'tenant', tenant, 'id', string.sub(member, 17),
    'queue', queue, 'priority', priority, 'member', member, 'state', 'queued',
    'enqueued_at', now, 'enqueue', token)
end
-- Key segments (keys.py) built once: the queue's and the tenant's.
local q = #queue .. ':' .. queue
redis.call('ZADD', base .. 'ready:' .. q .. #tenant .. ':' .. tenant .. ':' .. priority,
  available, member)
redis.call('HINCRBY', base .. 'stats:' .. q, 'depth', 1)
local at, at_now = tonumber(available), tonumber(now)
local heads = base .. 'heads:' .. q
-- The tenant's head answers most of its place in one read: with nothing queued it is in
-- none of rota, fresh and waiting (it joins); an item later than the head moves nothing.
local head = redis.call('ZSCORE', heads, tenant)
local join = not head
if not head then
  redis.call('ZADD', heads, available, tenant)
elseif at <= tonumber(head) then
  if at < tonumber(head) then redis.call('ZADD', heads, available, tenant) end
  if not redis.call('ZSCORE', base .. 'rota:' .. q, tenant) then
    local fresh_key, fresh_of = base .. 'fresh:' .. q, base .. 'fresh-of:' .. q
    local fresh = redis.call('HGET', fresh_of, tenant)
    if fresh then
      local mine = string.sub(member, 1, 16) .. tenant
      local was = tonumber(redis.call('ZSCORE', fresh_key, fresh))
      if at < was or (at == was and mine < fresh) then
        redis.call('ZREM', fresh_key, fresh)
        redis.call('ZADD', fresh_key, available, mine)
        redis.call('HSET', fresh_of, tenant, mine)
      end
    else
      join = true
    end
  end
end
if join then
  redis.call('SADD', base .. 'queues', queue)
  if at > at_now then
    redis.call('ZADD', base .. 'waiting:' .. q, 'LT', available, tenant)
  else
    if head then redis.call('ZREM', base .. 'waiting:' .. q, tenant) end
    local turn = redis.call('HGET', base .. 'turns:' .. q, tenant)
    if turn then
      redis.call('ZADD', base .. 'rota:' .. q, turn, tenant)
    else
      local mine = string.sub(member, 1, 16) .. tenant
      redis.call('ZADD', base .. 'fresh:' .. q, available, mine)
      redis.call('HSET', base .. 'fresh-of:' .. q, tenant, mine)
    end
  end
end
if at <= at_now then
  local bell = base .. 'bell:' .. q
  if redis.call('LLEN', bell) < 64 then redis.call('LPUSH', bell, now) end
end
return 1
