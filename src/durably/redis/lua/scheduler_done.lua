-- Answer a hand-out: delete the entry only if no wakeup arrived since (same receipt); a
-- hand-out in flight is in no tenant's line. KEYS: legacy ready set.
-- ARGV: prefix, default tenant, workflow, receipt
local workflow = ARGV[3]
if redis.call('HGET', receipts, workflow) ~= ARGV[4] then return 0 end
redis.call('ZREM', in_flight, workflow)
redis.call('ZREM', sleeping, workflow)
redis.call('HDEL', receipts, workflow)
redis.call('HDEL', taken, workflow)
redis.call('HDEL', tenant_of, workflow)
redis.call('HDEL', priority_of, workflow)
return 1
