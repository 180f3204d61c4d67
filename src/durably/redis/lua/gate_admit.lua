-- Take a first start through its gate. KEYS: the gate's meta. ARGV: gate prefix, workflow,
-- tenant, scheduler namespace, limit. Answers 1 when it is queued, 0 when admitted (a
-- workflow the gate knows already is answered as it stands).
local workflow, tenant = ARGV[2], ARGV[3]
redis.call('HSET', meta, 'limit', ARGV[5], 'space', ARGV[4])
local state = redis.call('HGET', marks, workflow)
if state then return state == 'queued' and 1 or 0 end
if admitted() < tonumber(ARGV[5]) and redis.call('SCARD', waiting) == 0 then
  redis.call('HSET', marks, workflow, 'held')
  serve(tenant)
  return 0
end
redis.call('ZADD', line(tenant), redis.call('HINCRBY', meta, 'seq', 1), workflow)
redis.call('SADD', waiting, tenant)
redis.call('HSET', marks, workflow, 'queued')
redis.call('HSET', tenant_of, workflow, tenant)
redis.call('HSET', space_of, workflow, ARGV[4])
return 1
