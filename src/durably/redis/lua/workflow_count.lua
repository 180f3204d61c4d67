-- Move a tenant's counts. KEYS: the tenant's counts. ARGV: running delta, started delta.
redis.call('HINCRBY', KEYS[1], 'running', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'started', ARGV[2])
return 1
