-- Shared by the scripts that queue an item in every case (prepended after queue_lib.lua):
-- queue_enqueue_full.lua queues one, queue_enqueue_many.lua several in one script.
-- Queue an item unless a live one holds its id or dedupe key. ``item`` is its hash;
-- ``available``, ``dedupe``, ``attempts`` and ``failures`` may be nil (now, none, 0, none);
-- ``ttl`` (seconds, or nil) keeps the dedupe key that long after the item finishes, and a
-- key kept so is answered with its finished item. ``gates`` (or nil) holds the item's flow
-- gates: concurrency key and limit, throttle key, interval and burst ('' or nil: none).
-- Answers 1 when queued (the caller knows the rest), or the live holder's item. A retry of
-- an enqueue that landed (its reply lost) finds its token on the item, whatever became of
-- the item since, and answers 1 again: one call, one item.
local function enqueue_item(item, tenant, member, queue, payload, priority, now, token,
                            available, dedupe, attempts, failures, ttl, gates)
  local id = string.sub(member, 17)
  local state = redis.call('HGET', item, 'state')
  if state or dedupe then
    if state and redis.call('HGET', item, 'enqueue') == token then return 1 end
    -- Rare paths: a live item or dedupe key holds it, or a terminal item frees its id.
    local holder = nil
    if state == 'queued' or state == 'claimed' then
      holder = item
    elseif dedupe then
      local other = redis.call('HGET', base .. 'dedupe', seg(tenant) .. seg(queue) .. seg(dedupe))
      if other then
        local key = item_key(seg(tenant) .. seg(other))
        local held = redis.call('HGET', key, 'state')
        if held == 'queued' or held == 'claimed' then
          holder = key
        elseif held then
          local field = seg(tenant) .. seg(queue) .. seg(dedupe)
          local until_at = redis.call('ZSCORE', base .. 'dedupe-kept', field)
          if until_at and tonumber(until_at) > tonumber(now) then holder = key end
        end
      end
    end
    if holder then
      local f = read_item(holder)
      redis.call('HINCRBY', qkey('stats', f[QUEUE]), 'duplicates', 1)
      return f
    end
    if state then
      -- A terminal item frees its id and key: the new one replaces it.
      local f = read_item(item)
      if f[STATE] == 'dead_lettered' then
        local ref = seg(tenant) .. seg(id)
        redis.call('ZREM', qkey('dead', f[QUEUE]), ref)
        redis.call('ZREM', base .. 'dead-tenant:' .. seg(tenant), ref)
      end
      forget_dedupe(f)
      redis.call('DEL', item)
    end
  end
  -- Fields that are still unset are not written (a missing field reads as unset), nor are
  -- the attempts (0 while missing) and, for an item due at once, its availability (the
  -- enqueue time while missing): read_item's readers supply both.
  local fields = {'payload', payload, 'tenant', tenant, 'id', id, 'queue', queue,
    'priority', priority, 'member', member, 'state', 'queued', 'enqueued_at', now,
    'enqueue', token}
  local function add(name, value) fields[#fields + 1] = name; fields[#fields + 1] = value end
  if dedupe then
    add('dedupe', dedupe)
    local field = seg(tenant) .. seg(queue) .. seg(dedupe)
    redis.call('HSET', base .. 'dedupe', field, id)
    redis.call('ZREM', base .. 'dedupe-kept', field)  -- a kept key whose time was up
    if ttl then add('dedupe_ttl', ttl) end
  end
  if available then add('available_at', available) end
  if attempts then add('attempts', attempts); add('failures', failures) end
  if gates then
    if gates[1] and gates[1] ~= '' then
      add('concurrency_key', gates[1]); add('concurrency_limit', gates[2])
    end
    if gates[3] and gates[3] ~= '' then
      add('throttle_key', gates[3]); add('throttle_seconds', gates[4])
      add('throttle_burst', gates[5])
    end
  end
  redis.call('HSET', item, unpack(fields))
  add_ready(queue, tenant, priority, member, available or now, now)
  if not available or tonumber(available) <= tonumber(now) then ring(queue, now) end
  return 1
end
