-- Workflow gates (durably.stores.gates): a gate's keys live in the gate's slot, named from
-- ARGV[1] (its prefix): `meta` (limit, admitted, served, seq), `marks` (workflow: queued,
-- held or free), `live` (the workflows marked queued or held: what the repair pass
-- walks), `moved` (workflow: the number of its last crossing the gate took),
-- `turns` (tenant: its last admission's serial), `waiting` (tenants with a line),
-- `tenant-of`, `space-of` and `priority-of` (a queued workflow's tenant, scheduler
-- namespace and priority, the last only when not NORMAL), and a line per tenant (a sorted
-- set scored by priority offset plus the order queued: durably.redis.order).
local prefix = ARGV[1]
local meta, marks, turns = prefix .. 'meta', prefix .. 'marks', prefix .. 'turns'
local moved, live = prefix .. 'moved', prefix .. 'live'
local waiting, tenant_of, space_of = prefix .. 'waiting', prefix .. 'tenant-of', prefix .. 'space-of'
local priority_of = prefix .. 'priority-of'

local function line(tenant) return prefix .. 'line:' .. #tenant .. ':' .. tenant end

local function admitted() return tonumber(redis.call('HGET', meta, 'admitted') or '0') end

-- Mark `workflow` queued, held or free (nil: forget it), keeping `live` beside the marks.
local function mark(workflow, state)
  if state then redis.call('HSET', marks, workflow, state) else redis.call('HDEL', marks, workflow) end
  if state == 'queued' or state == 'held' then
    redis.call('SADD', live, workflow)
  else
    redis.call('SREM', live, workflow)
  end
end

-- One more admitted for `tenant`, and the tenant to the back of the gate's rotation.
local function serve(tenant)
  redis.call('HINCRBY', meta, 'admitted', 1)
  redis.call('HSET', turns, tenant, redis.call('HINCRBY', meta, 'served', 1))
end

local function leave(workflow)
  local tenant = redis.call('HGET', tenant_of, workflow)
  if not tenant then return end
  redis.call('ZREM', line(tenant), workflow)
  if redis.call('ZCARD', line(tenant)) == 0 then redis.call('SREM', waiting, tenant) end
end

-- The tenant whose head goes next: the lowest turn (0: never admitted), ties to the head
-- of the highest priority, then queued first (durably.stores.gates.GateLine).
local function next_tenant()
  local best, best_turn, best_seq
  for _, tenant in ipairs(redis.call('SMEMBERS', waiting)) do
    local head = redis.call('ZRANGE', line(tenant), 0, 0, 'WITHSCORES')
    if #head > 0 then
      local turn = tonumber(redis.call('HGET', turns, tenant) or '0')
      local seq = tonumber(head[2])
      if not best or turn < best_turn or (turn == best_turn and seq < best_seq) then
        best, best_turn, best_seq = tenant, turn, seq
      end
    end
  end
  return best
end

-- Admit from the line while the gate has room; each admitted appended to `out` as
-- workflow, tenant, namespace, priority ('' for NORMAL).
local function admit_next(out)
  local limit = tonumber(redis.call('HGET', meta, 'limit') or '0')
  while admitted() < limit do
    local tenant = next_tenant()
    if not tenant then return end
    local workflow = redis.call('ZRANGE', line(tenant), 0, 0)[1]
    leave(workflow)
    mark(workflow, 'held')
    serve(tenant)
    out[#out + 1] = workflow
    out[#out + 1] = tenant
    out[#out + 1] = redis.call('HGET', space_of, workflow) or ''
    out[#out + 1] = redis.call('HGET', priority_of, workflow) or ''
  end
end
