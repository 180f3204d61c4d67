-- Add to a run's counters server-side (HINCRBY, so concurrent patches all land) and bump
-- its version. KEYS: run blob, run meta. ARGV: updated_at, then field/amount pairs.
if redis.call('EXISTS', KEYS[2]) == 0 then return false end
for i = 2, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('HSET', KEYS[2], 'updated_at', ARGV[1])
return {redis.call('GET', KEYS[1]), redis.call('HGETALL', KEYS[2])}
