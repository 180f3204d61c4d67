-- Remove the workflow's entry whatever its state. KEYS: legacy ready set.
-- ARGV: prefix, default tenant, workflow
local workflow = ARGV[3]
unqueue(workflow, owner(workflow))
redis.call('ZREM', sleeping, workflow)
redis.call('ZREM', in_flight, workflow)
redis.call('HDEL', receipts, workflow)
redis.call('HDEL', taken, workflow)
redis.call('HDEL', tenant_of, workflow)
redis.call('HDEL', priority_of, workflow)
return 1
