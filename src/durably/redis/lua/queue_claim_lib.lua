-- The claim itself, shared by queue_claim.lua and queue_claim_many.lua (prepended after
-- queue_lib.lua): take one due item of ``queue`` for ``worker`` as of ``now``, leased
-- until ``expires``. Returns the item read as ``f`` (or false when nothing is due), and
-- how many delayed tenants it promoted into the rotation.
local WALK = 32  -- tenants a claim looks at past those whose items are all gated
local SCAN = 64  -- gated items a claim passes over within one tenant and priority

-- Whether the flow gates of ``item`` (durably.stores.flow) let it be claimed at ``now``.
local function gate_open(queue, item, now)
  local g = redis.call('HMGET', item, 'concurrency_key', 'concurrency_limit', 'throttle_key',
    'throttle_seconds', 'throttle_burst')
  if g[1] then
    local running = tonumber(redis.call('HGET', qkey('running', queue), g[1]) or '0')
    if running >= tonumber(g[2]) then return false end
  end
  if g[3] then
    local tat = redis.call('HGET', qkey('tat', queue), g[3])
    if tat and tonumber(tat) - (tonumber(g[5]) - 1) * tonumber(g[4]) > tonumber(now) then
      return false
    end
  end
  return true
end

-- The tenant's first due item its gates let through, in its order (priority, then age):
-- its priority and member, or nils; and whether a due item was passed over for its gates.
local function pick(queue, tenant, now, priorities)
  local held = false
  for _, p in ipairs(priorities) do
    local key = ready_key(queue, tenant, p)
    for offset = 0, SCAN - 1, 16 do
      local hits = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', offset, 16)
      for _, m in ipairs(hits) do
        if gate_open(queue, item_key(seg(tenant) .. seg(string.sub(m, 17))), now) then
          return p, m, held
        end
        held = true
      end
      if #hits < 16 then break end
    end
  end
  return nil, nil, held
end

-- The claimed item read as ``f`` takes its gates: one more running item of its concurrency
-- key, its throttle key's arrival time moved on (`throttle_admits`).
local function take_gates(queue, f, now)
  if f[CKEY] then redis.call('HINCRBY', qkey('running', queue), f[CKEY], 1) end
  if f[TKEY] then
    local at, step = tonumber(now), tonumber(f[TSECONDS])
    local tolerance = (tonumber(f[TBURST]) - 1) * step
    local tat = tonumber(redis.call('HGET', qkey('tat', queue), f[TKEY]) or (at + tolerance))
    redis.call('HSET', qkey('tat', queue), f[TKEY],
      string.format('%.17g', math.max(tat, at) + step))
  end
end

local function claim(queue, worker, now, expires, priorities)
  local rota, fresh = qkey('rota', queue), qkey('fresh', queue)
  local waiting = qkey('waiting', queue)
  local fresh_of, turns = qkey('fresh-of', queue), qkey('turns', queue)
  if redis.call('EXISTS', qkey('active', queue)) == 1 then relayout(queue, priorities) end
  -- Tenants whose earliest item has come due join the rotation: by their turn if they
  -- were ever served, else among the fresh by their oldest item. Each is promoted once per
  -- time it comes due, so this costs a claim nothing while no delayed tenant is due; at
  -- most PROMOTE a claim, earliest first, so no script runs long when thousands come due
  -- at one instant (the rest join over the next claims).
  local due = redis.call('ZRANGEBYSCORE', waiting, '-inf', now, 'LIMIT', 0, PROMOTE)
  if due[1] then
    for _, tenant in ipairs(due) do
      local turn = redis.call('HGET', turns, tenant)
      if turn then
        redis.call('ZADD', rota, turn, tenant)
      else
        local at, member = head_of(queue, tenant, priorities)
        local mine = turn_order(member, tenant)
        redis.call('ZADD', fresh, at, mine)
        redis.call('HSET', fresh_of, tenant, mine)
      end
    end
    redis.call('ZREM', waiting, unpack(due))
  end
  -- The first fresh tenant (turn 0) goes before every served one; else the lowest turn.
  -- A tenant whose due items are all held by their flow gates is passed over, its place
  -- kept, for the next (at most WALK tenants a claim).
  local tenant, first_fresh, priority, member = nil, nil, nil, nil
  for i = 0, WALK - 1 do
    local entry = redis.call('ZRANGE', fresh, i, i)[1]
    if not entry then break end
    local p, m, held = pick(queue, string.sub(entry, 17), now, priorities)
    if m or not held then
      tenant, first_fresh, priority, member = string.sub(entry, 17), entry, p, m
      break
    end
  end
  if not tenant then
    for i = 0, WALK - 1 do
      local entry = redis.call('ZRANGE', rota, i, i)[1]
      if not entry then break end
      local p, m, held = pick(queue, entry, now, priorities)
      if m or not held then
        tenant, priority, member = entry, p, m
        break
      end
    end
    if not tenant then return false, #due end
  end
  -- The served tenant goes to the back of the rotation, or out of it (delayed or empty).
  local turn = redis.call('INCR', qkey('turn', queue))
  if first_fresh then
    redis.call('ZREM', fresh, first_fresh)
    redis.call('HDEL', fresh_of, tenant)
  end
  if member then
    redis.call('ZREM', ready_key(queue, tenant, priority), member)
    redis.call('HINCRBY', qkey('stats', queue), 'depth', -1)
  end
  local at = head_of(queue, tenant, priorities)
  if at and at <= tonumber(now) then
    redis.call('ZADD', rota, turn, tenant)
    redis.call('ZADD', qkey('heads', queue), at, tenant)
  else
    redis.call('ZREM', rota, tenant)
    redis.call('HSET', turns, tenant, turn)
    if at then
      redis.call('ZADD', waiting, at, tenant)
      redis.call('ZADD', qkey('heads', queue), at, tenant)
    else
      redis.call('ZREM', qkey('heads', queue), tenant)
    end
  end
  -- Only a store changed outside these scripts leaves a tenant in the rotation with
  -- nothing due; it has been put right above, and this claim finds nothing.
  if not member then return false, #due end
  local id = string.sub(member, 17)
  local ref = seg(tenant) .. seg(id)
  local item = item_key(ref)
  local f = read_item(item)
  if not f[FIRST_CLAIMED] or f[FIRST_CLAIMED] == '' then
    f[FIRST_CLAIMED] = now
    redis.call('HSET', item, 'state', 'claimed', 'worker', worker, 'claimed_at', now,
      'lease_expires_at', expires, 'first_claimed_at', now)
  else
    redis.call('HSET', item, 'state', 'claimed', 'worker', worker, 'claimed_at', now,
      'lease_expires_at', expires)
  end
  redis.call('ZADD', qkey('leases', queue), expires, ref)
  redis.call('SADD', base .. 'held:' .. seg(worker), ref)
  take_gates(queue, f, now)
  f[STATE], f[WORKER], f[CLAIMED], f[LEASE] = 'claimed', worker, now, expires
  return f, #due
end

-- Up to ``limit`` claims as `claim` makes them, in the order single claims would take
-- them (queue_claim_many.lua, queue_complete_claim.lua): the items taken. Stops when a
-- claim finds nothing, and after a claim that promoted delayed tenants (that one's work
-- is bounded by PROMOTE, and so is the script's).
local function claim_up_to(limit, queue, worker, now, expires, priorities)
  local taken = {}
  for _ = 1, limit do
    local f, promoted = claim(queue, worker, now, expires, priorities)
    if not f then break end
    taken[#taken + 1] = f
    if promoted > 0 then break end
  end
  return taken
end
