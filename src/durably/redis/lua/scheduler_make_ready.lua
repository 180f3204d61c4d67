-- Make the workflow ready now, in the named tenant's line ('' keeps its tenant; a new
-- entry takes the default). KEYS: legacy ready set. ARGV: prefix, default tenant,
-- workflow, tenant, only if it has no entry ('1', optional), its priority offset (''
-- or none keeps its priority, '0' is NORMAL). Answers 1 if made ready (or found so).
local workflow = ARGV[3]
local had = redis.call('HGET', tenant_of, workflow)
if had and ARGV[5] == '1' then return 0 end
local tenant = ARGV[4] ~= '' and ARGV[4] or had or default_tenant
-- Queued already in that line at that priority: left as it is (it keeps its place).
if had == tenant and redis.call('ZSCORE', line(tenant), workflow)
    and (not ARGV[6] or ARGV[6] == '' or ARGV[6] == (redis.call('HGET', priority_of, workflow) or '0')) then
  ring()
  return 1
end
if had then unqueue(workflow, had) end
if ARGV[6] == '0' then
  redis.call('HDEL', priority_of, workflow)
elseif ARGV[6] and ARGV[6] ~= '' then
  redis.call('HSET', priority_of, workflow, ARGV[6])
end
queue(workflow, tenant, now_us())
ring()
return 1
