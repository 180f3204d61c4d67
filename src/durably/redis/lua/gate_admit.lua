-- Take a start through its gate. KEYS: the gate's meta. ARGV: gate prefix, workflow,
-- tenant, scheduler namespace, limit ('': keep the gate's, 1 for a gate never used; a
-- start from a process not registering the kind), fresh ('1': its record was just
-- written, so a mark and crossings the gate keeps for the id belong to an earlier
-- workflow of that id), its priority's line offset and its priority ('' for NORMAL). A
-- limit raised since the last start first admits from the line up to it. Answers 1 when
-- the start is queued, 0 when admitted (a workflow the gate holds or queues already is
-- answered as it stands; a free mark is an earlier one's, deleted since), then the
-- workflows admitted from the line, flat: workflow, tenant, namespace, priority.
local workflow, tenant = ARGV[2], ARGV[3]
if ARGV[5] ~= '' then
  redis.call('HSET', meta, 'limit', ARGV[5])
elseif not redis.call('HGET', meta, 'limit') then
  redis.call('HSET', meta, 'limit', '1')
end
redis.call('HSET', meta, 'space', ARGV[4])
if ARGV[6] == '1' then redis.call('HDEL', moved, workflow) end
local out = {0}
admit_next(out)
local state = redis.call('HGET', marks, workflow)
if state and state ~= 'free' then
  out[1] = state == 'queued' and 1 or 0
  return out
end
if admitted() < tonumber(redis.call('HGET', meta, 'limit')) and redis.call('SCARD', waiting) == 0 then
  mark(workflow, 'held')
  serve(tenant)
  return out
end
local seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('ZADD', line(tenant), string.format('%.0f', tonumber(ARGV[7]) + seq), workflow)
if ARGV[8] ~= '' then redis.call('HSET', priority_of, workflow, ARGV[8]) end
redis.call('SADD', waiting, tenant)
mark(workflow, 'queued')
redis.call('HSET', tenant_of, workflow, tenant)
redis.call('HSET', space_of, workflow, ARGV[4])
out[1] = 1
return out
