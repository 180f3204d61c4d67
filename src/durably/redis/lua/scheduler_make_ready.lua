-- Make the workflow ready now, in the named tenant's line ('' keeps its tenant; a new
-- entry takes the default). KEYS: legacy ready set. ARGV: prefix, default tenant,
-- workflow, tenant, only if it has no entry ('1', optional). Answers 1 if made ready.
local workflow = ARGV[3]
local had = redis.call('HGET', tenant_of, workflow)
if had and ARGV[5] == '1' then return 0 end
local tenant = ARGV[4] ~= '' and ARGV[4] or had or default_tenant
if had then unqueue(workflow, had) end
queue(workflow, tenant, now_us())
ring()
return 1
