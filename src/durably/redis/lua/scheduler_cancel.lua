-- Remove the workflow's entry whatever its state. KEYS: ready. ARGV: prefix, workflow
redis.call('ZREM', ready, ARGV[2])
redis.call('ZREM', sleeping, ARGV[2])
redis.call('HDEL', receipts, ARGV[2])
redis.call('HDEL', taken, ARGV[2])
return 1
