-- Take a start through its gate. KEYS: the gate's meta. ARGV: gate prefix, workflow,
-- tenant, scheduler namespace, limit, fresh ('1': its record was just written, so a mark
-- and crossings the gate keeps for the id belong to an earlier workflow of that id).
-- Answers 1 when it is queued, 0 when admitted (a workflow the gate holds or queues
-- already is answered as it stands; a free mark is an earlier one's, deleted since).
local workflow, tenant = ARGV[2], ARGV[3]
redis.call('HSET', meta, 'limit', ARGV[5], 'space', ARGV[4])
if ARGV[6] == '1' then redis.call('HDEL', moved, workflow) end
local state = redis.call('HGET', marks, workflow)
if state and state ~= 'free' then return state == 'queued' and 1 or 0 end
if admitted() < tonumber(ARGV[5]) and redis.call('SCARD', waiting) == 0 then
  mark(workflow, 'held')
  serve(tenant)
  return 0
end
redis.call('ZADD', line(tenant), redis.call('HINCRBY', meta, 'seq', 1), workflow)
redis.call('SADD', waiting, tenant)
mark(workflow, 'queued')
redis.call('HSET', tenant_of, workflow, tenant)
redis.call('HSET', space_of, workflow, ARGV[4])
return 1
