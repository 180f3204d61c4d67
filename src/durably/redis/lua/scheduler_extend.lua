-- Keep a hand-out invisible for ``within`` more. KEYS: ready.
-- ARGV: prefix, workflow, receipt, within (us)
if redis.call('HGET', receipts, ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('ZADD', ready, fmt(now_us() + tonumber(ARGV[4])), ARGV[2])
return 1
