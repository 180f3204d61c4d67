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

-- A tenant is in the queue's rotation (the active set, scored by its turn) exactly while it
-- has a queued item, due or delayed. Membership is read, not counted, so an enqueue into an
-- active tenant writes only its ready set; and the active set is also what `stats` walks.
local function join(queue, tenant)
  -- A tenant coming back keeps the turn it had, so emptying out never jumps the queue.
  local turn = redis.call('HGET', qkey('turns', queue), tenant) or 0
  redis.call('ZADD', qkey('active', queue), turn, tenant)
  -- The registry `reap` walks; a queue with an active tenant is in it already.
  redis.call('SADD', base .. 'queues', queue)
end
local function add_ready(queue, tenant, priority, member, available)
  redis.call('ZADD', ready_key(queue, tenant, priority), available, member)
  if not redis.call('ZSCORE', qkey('active', queue), tenant) then join(queue, tenant) end
end

-- Take ``member`` out of its ready set and send the served tenant to the back of the
-- rotation with ``turn``. ``priorities``: every priority's name (ARGV of the claim), to see
-- the tenant emptied. A tenant's turn lives in the active set while it has queued items
-- and is kept in the turns hash only once it leaves (one write per claim, not two), so a
-- tenant coming back keeps the turn it had.
local function remove_ready(queue, tenant, priority, member, priorities, turn)
  redis.call('ZREM', ready_key(queue, tenant, priority), member)
  local sets = {}
  for i, p in ipairs(priorities) do sets[i] = ready_key(queue, tenant, p) end
  local active = qkey('active', queue)
  if redis.call('EXISTS', unpack(sets)) == 0 then
    redis.call('HSET', qkey('turns', queue), tenant, turn)
    redis.call('ZREM', active, tenant)
  else
    redis.call('ZADD', active, 'XX', turn, tenant)
  end
end

-- An item as one read, answered whole (queue.py reads it by position): the payload (JSON),
-- the fields a claim or a settle changes, then what the item was enqueued as. A field
-- never written reads as false: the attempts then count 0, and the availability is the
-- enqueue time (queue_enqueue.lua writes neither for a fresh item due at once).
local PAYLOAD, ATTEMPTS, STATE, WORKER, ENQUEUED, AVAILABLE = 1, 2, 3, 4, 5, 6
local LEASE, FIRST_CLAIMED, CLAIMED, FAILURES = 7, 8, 9, 10
local QUEUE, DEDUPE, TENANT, ID, PRIORITY, MEMBER = 11, 12, 13, 14, 15, 16
local function read_item(item)
  return redis.call('HMGET', item, 'payload', 'attempts', 'state', 'worker', 'enqueued_at',
    'available_at', 'lease_expires_at', 'first_claimed_at', 'claimed_at', 'failures',
    'queue', 'dedupe', 'tenant', 'id', 'priority', 'member')
end

local function forget_dedupe(f)
  if f[DEDUPE] and f[DEDUPE] ~= '' then
    local field = seg(f[TENANT]) .. seg(f[QUEUE]) .. seg(f[DEDUPE])
    if redis.call('HGET', base .. 'dedupe', field) == f[ID] then
      redis.call('HDEL', base .. 'dedupe', field)
    end
  end
end
