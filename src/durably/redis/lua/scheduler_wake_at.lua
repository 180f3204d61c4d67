-- Answer a hand-out by sleeping until ``when`` (caller's clock); never push out a wakeup
-- that arrived meanwhile. KEYS: legacy ready set.
-- ARGV: prefix, default tenant, workflow, receipt, when
local workflow, when = ARGV[3], ARGV[5]
local due = redis.call('ZSCORE', sleeping, workflow)
if not due and redis.call('HEXISTS', tenant_of, workflow) == 0 then return 0 end
if redis.call('HGET', receipts, workflow) == ARGV[4] then
  redis.call('ZREM', in_flight, workflow)
  redis.call('HDEL', receipts, workflow)
  redis.call('HDEL', taken, workflow)
  redis.call('ZADD', sleeping, when, workflow)
elseif due and tonumber(when) < tonumber(due) then
  redis.call('ZADD', sleeping, when, workflow)
end
return 1
