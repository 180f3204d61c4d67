-- Keep a hand-out invisible for ``within`` more. KEYS: legacy ready set.
-- ARGV: prefix, default tenant, workflow, receipt, within (us)
if redis.call('HGET', receipts, ARGV[3]) ~= ARGV[4] then return 0 end
redis.call('ZADD', in_flight, fmt(now_us() + tonumber(ARGV[5])), ARGV[3])
return 1
