-- Shared by every queue script (prepended at load). ARGV[1] is always the queue prefix
-- (it carries the namespace hash tag, so every key built here lives in the same slot).
local base = ARGV[1]
local function seg(s) return #s .. ':' .. s end
local function qkey(kind, queue) return base .. kind .. ':' .. seg(queue) end
local function ready_key(queue, tenant, priority)
  return base .. 'ready:' .. seg(queue) .. seg(tenant) .. ':' .. priority
end
local function item_key(ref) return base .. 'item:' .. ref end

local function ring(queue, due_at)
  -- The doorbell an idle worker blocks on, one ring per due item (so as many idle workers
  -- wake), bounded so nobody has to drain it. A ring carries an instant (on the ringer's
  -- clock) at which its item is due: a waiting claim (queue_claim.lua) sent before that
  -- instant claims as of it.
  local bell = qkey('bell', queue)
  if redis.call('LLEN', bell) < 64 then redis.call('LPUSH', bell, due_at) end
end

-- Where a queue's tenants stand (docs/redis.md, "Runs and work"), so a claim reads
-- the first of a sorted set instead of every tenant:
--   rota     served tenants with a due item, scored by their turn;
--   fresh    never-served tenants with a due item, scored by their oldest item's
--            availability, member its 16-digit enqueue order then the tenant (the tie-break
--            a first turn takes); fresh-of maps the tenant to that member;
--   waiting  tenants whose queued items are all delayed, scored by the earliest
--            availability; a claim promotes those that have come due (up to PROMOTE);
--   heads    every tenant with a queued item, by its earliest availability (what `stats`
--            reads for the oldest due item);
--   turns    a served tenant's turn while it is out of rota (it keeps it when it returns).
-- A tenant with a queued item is in exactly one of rota, fresh and waiting.
local PROMOTE = 200
local function turn_order(member, tenant) return string.sub(member, 1, 16) .. tenant end

-- ``tenant`` has a new queued item ``member``, available at ``available`` (a number):
-- its place follows, as of ``now``. The tenant's head answers most of it in one read: a
-- tenant with nothing queued is in none of rota, fresh and waiting, and an item later than
-- the head moves nothing (an older item placed the tenant; a waiting tenant whose head
-- has come due joins the rotation at the next claim, as it would without this item).
local function place(queue, tenant, member, available, now)
  local heads, mine = qkey('heads', queue), turn_order(member, tenant)
  local head = redis.call('ZSCORE', heads, tenant)
  if not head then
    redis.call('ZADD', heads, available, tenant)
  else
    head = tonumber(head)
    if available > head then return end
    if available < head then redis.call('ZADD', heads, available, tenant) end
    if redis.call('ZSCORE', qkey('rota', queue), tenant) then return end
    local fresh_key, fresh_of = qkey('fresh', queue), qkey('fresh-of', queue)
    local fresh = redis.call('HGET', fresh_of, tenant)
    if fresh then
      -- Due and never served: the tenant's tie-break is its oldest item, which this may be.
      local at = tonumber(redis.call('ZSCORE', fresh_key, fresh))
      if available < at or (available == at and mine < fresh) then
        redis.call('ZREM', fresh_key, fresh)
        redis.call('ZADD', fresh_key, available, mine)
        redis.call('HSET', fresh_of, tenant, mine)
      end
      return
    end
  end
  -- The registry `reap` walks.
  redis.call('SADD', base .. 'queues', queue)
  if available > now then
    redis.call('ZADD', qkey('waiting', queue), 'LT', available, tenant)
    return
  end
  -- Due now, so older than whatever the tenant had waiting: it joins the rotation.
  if head then redis.call('ZREM', qkey('waiting', queue), tenant) end
  local turn = redis.call('HGET', qkey('turns', queue), tenant)
  if turn then
    redis.call('ZADD', qkey('rota', queue), turn, tenant)
  else
    redis.call('ZADD', qkey('fresh', queue), available, mine)
    redis.call('HSET', qkey('fresh-of', queue), tenant, mine)
  end
end
local function add_ready(queue, tenant, priority, member, available, now)
  redis.call('ZADD', ready_key(queue, tenant, priority), available, member)
  redis.call('HINCRBY', qkey('stats', queue), 'depth', 1)
  place(queue, tenant, member, tonumber(available), tonumber(now))
end

-- The tenant's oldest queued item over ``priorities``: its availability and member, or nil.
local function head_of(queue, tenant, priorities)
  local at, member = nil, nil
  for _, p in ipairs(priorities) do
    local first = redis.call('ZRANGE', ready_key(queue, tenant, p), 0, 0, 'WITHSCORES')
    if first[1] then
      local score = tonumber(first[2])
      if not at or score < at or (score == at and first[1] < member) then
        at, member = score, first[1]
      end
    end
  end
  return at, member
end

-- A queue written before the rotation sets kept its tenants in one set scored by turn
-- ('active', 0 = never served), walked by every claim, and counted no depth. The first
-- claim or stats call after the upgrade moves those tenants to waiting with their turns (a
-- claim promotes them at once), taking them out of wherever an enqueue since the upgrade
-- placed them without their turn, and counts the depth once, over every tenant.
local function relayout(queue, priorities)
  local active, fresh_of = qkey('active', queue), qkey('fresh-of', queue)
  local old = redis.call('ZRANGE', active, 0, -1, 'WITHSCORES')
  for i = 1, #old, 2 do
    local tenant, turn = old[i], old[i + 1]
    if tonumber(turn) > 0 then redis.call('HSET', qkey('turns', queue), tenant, turn) end
    local fresh = redis.call('HGET', fresh_of, tenant)
    if fresh then
      redis.call('ZREM', qkey('fresh', queue), fresh)
      redis.call('HDEL', fresh_of, tenant)
    end
    redis.call('ZREM', qkey('rota', queue), tenant)
    local at = head_of(queue, tenant, priorities)
    if at then
      redis.call('ZADD', qkey('waiting', queue), at, tenant)
      redis.call('ZADD', qkey('heads', queue), at, tenant)
    end
  end
  local depth = 0
  for _, tenant in ipairs(redis.call('ZRANGE', qkey('heads', queue), 0, -1)) do
    for _, p in ipairs(priorities) do
      depth = depth + redis.call('ZCARD', ready_key(queue, tenant, p))
    end
  end
  redis.call('HSET', qkey('stats', queue), 'depth', depth)
  redis.call('DEL', active)
end

-- An item as one read, answered whole (queue.py reads it by position): the payload (JSON),
-- the fields a claim or a settle changes, then what the item was enqueued as. A field
-- never written reads as false: the attempts then count 0, and the availability is the
-- enqueue time (queue_enqueue.lua writes neither for a fresh item due at once).
local PAYLOAD, ATTEMPTS, STATE, WORKER, ENQUEUED, AVAILABLE = 1, 2, 3, 4, 5, 6
local LEASE, FIRST_CLAIMED, CLAIMED, FAILURES = 7, 8, 9, 10
local QUEUE, DEDUPE, TENANT, ID, PRIORITY, MEMBER = 11, 12, 13, 14, 15, 16
-- The flow gates (durably.stores.flow), unset for an item under none.
local CKEY, CLIMIT, TKEY, TSECONDS, TBURST = 17, 18, 19, 20, 21
local function read_item(item)
  return redis.call('HMGET', item, 'payload', 'attempts', 'state', 'worker', 'enqueued_at',
    'available_at', 'lease_expires_at', 'first_claimed_at', 'claimed_at', 'failures',
    'queue', 'dedupe', 'tenant', 'id', 'priority', 'member', 'concurrency_key',
    'concurrency_limit', 'throttle_key', 'throttle_seconds', 'throttle_burst')
end

-- A claimed item no longer runs: its concurrency key counts one fewer.
local function release_gate(f)
  if f[CKEY] then redis.call('HINCRBY', qkey('running', f[QUEUE]), f[CKEY], -1) end
end

local function forget_dedupe(f)
  if f[DEDUPE] and f[DEDUPE] ~= '' then
    local field = seg(f[TENANT]) .. seg(f[QUEUE]) .. seg(f[DEDUPE])
    if redis.call('HGET', base .. 'dedupe', field) == f[ID] then
      redis.call('HDEL', base .. 'dedupe', field)
    end
  end
end

-- The item read as ``f`` has just finished (completed or dead-lettered): its dedupe key is
-- freed, or, when it was enqueued with a time to live, kept that long from ``now`` (the
-- mapping stays; 'dedupe-kept' scores it by expiry). Returns the time to live, or nil.
local function finish_dedupe(f, now)
  if f[DEDUPE] and f[DEDUPE] ~= '' then
    local ttl = redis.call('HGET', item_key(seg(f[TENANT]) .. seg(f[ID])), 'dedupe_ttl')
    local field = seg(f[TENANT]) .. seg(f[QUEUE]) .. seg(f[DEDUPE])
    if ttl and redis.call('HGET', base .. 'dedupe', field) == f[ID] then
      redis.call('ZADD', base .. 'dedupe-kept', now + tonumber(ttl), field)
      return tonumber(ttl)
    end
  end
  forget_dedupe(f)
  return nil
end
