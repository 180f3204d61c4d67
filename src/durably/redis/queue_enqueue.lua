-- Queue an item unless a live one holds its id or dedupe key.
-- KEYS: item hash. ARGV: prefix, tenant, id, queue, payload (JSON), priority, now, then
-- optionally available_at ('' or absent: now) and a dedupe key (absent: none).
-- Answers 1 when queued (the caller knows the rest), or the live holder's item.
local item = KEYS[1]
local tenant, id, queue, payload = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local priority, now, available, dedupe = ARGV[6], ARGV[7], ARGV[8], ARGV[9] or ''
if not available or available == '' then available = now end
local ref = seg(tenant) .. seg(id)
local function live(state) return state == 'queued' or state == 'claimed' end
local state = redis.call('HGET', item, 'state')
local holder = nil
if live(state) then
  holder = item
elseif dedupe ~= '' then
  local other = redis.call('HGET', base .. 'dedupe', seg(tenant) .. seg(queue) .. seg(dedupe))
  if other and live(redis.call('HGET', item_key(seg(tenant) .. seg(other)), 'state')) then
    holder = item_key(seg(tenant) .. seg(other))
  end
end
if holder then
  local f = read_item(holder)
  redis.call('HINCRBY', qkey('stats', f[QUEUE]), 'duplicates', 1)
  return f
end
if state then
  -- A terminal item frees its id and key: the new one replaces it.
  local old = redis.call('HMGET', item, 'queue', 'state')
  if old[2] == 'dead_lettered' then
    redis.call('ZREM', qkey('dead', old[1]), ref)
    redis.call('ZREM', base .. 'dead-tenant:' .. seg(tenant), ref)
  end
  forget_dedupe(read_item(item))
  redis.call('DEL', item)
end
local sequence = redis.call('INCR', base .. 'seq')
-- Equal availability is broken by enqueue order: the member sorts by a padded sequence.
local member = string.format('%016.0f', sequence) .. id
-- Fields that are still unset are not written (a missing field reads as unset).
if dedupe ~= '' then
  redis.call('HSET', item, 'payload', payload, 'tenant', tenant, 'id', id, 'queue', queue,
    'priority', priority, 'dedupe', dedupe, 'member', member, 'state', 'queued',
    'attempts', 0, 'enqueued_at', now, 'available_at', available)
  redis.call('HSET', base .. 'dedupe', seg(tenant) .. seg(queue) .. seg(dedupe), id)
else
  redis.call('HSET', item, 'payload', payload, 'tenant', tenant, 'id', id, 'queue', queue,
    'priority', priority, 'member', member, 'state', 'queued',
    'attempts', 0, 'enqueued_at', now, 'available_at', available)
end
add_ready(queue, tenant, priority, member, available)
if tonumber(available) <= tonumber(now) then ring(queue, now) end
return 1
