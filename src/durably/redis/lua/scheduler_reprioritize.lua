-- Serve the workflow's entry at another priority, its visibility kept: a queued one is
-- scored again in its tenant's line (a fresh tenant's head with it); a sleeping or
-- in-flight one keeps the priority for when it is queued again. KEYS: legacy ready set.
-- ARGV: prefix, default tenant, workflow, its priority offset ('0' is NORMAL).
-- Answers 1, or 0 when the workflow has no entry.
local workflow = ARGV[3]
local tenant = redis.call('HGET', tenant_of, workflow)
if not tenant then return 0 end
if ARGV[4] == '0' then
  redis.call('HDEL', priority_of, workflow)
else
  redis.call('HSET', priority_of, workflow, ARGV[4])
end
local score = redis.call('ZSCORE', line(tenant), workflow)
if score then
  redis.call('ZADD', line(tenant), rank(workflow, tonumber(seen_at(score))), workflow)
  settle(tenant)
end
return 1
