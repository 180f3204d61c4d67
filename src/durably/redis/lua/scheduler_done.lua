-- Answer a hand-out: delete the entry only if no wakeup arrived since (same receipt).
-- KEYS: ready. ARGV: prefix, workflow, receipt
if redis.call('HGET', receipts, ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('ZREM', ready, ARGV[2])
redis.call('ZREM', sleeping, ARGV[2])
redis.call('HDEL', receipts, ARGV[2])
redis.call('HDEL', taken, ARGV[2])
return 1
