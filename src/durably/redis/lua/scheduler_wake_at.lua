-- Answer a hand-out by sleeping until ``when`` (caller's clock); never push out a wakeup
-- that arrived meanwhile. KEYS: ready. ARGV: prefix, workflow, receipt, when
local workflow, when = ARGV[2], ARGV[4]
local due = redis.call('ZSCORE', sleeping, workflow)
local queued = redis.call('ZSCORE', ready, workflow)
if not due and not queued then return 0 end
if redis.call('HGET', receipts, workflow) == ARGV[3] then
  redis.call('ZREM', ready, workflow)
  redis.call('HDEL', receipts, workflow)
  redis.call('HDEL', taken, workflow)
  redis.call('ZADD', sleeping, when, workflow)
elseif due and tonumber(when) < tonumber(due) then
  redis.call('ZADD', sleeping, when, workflow)
end
return 1
