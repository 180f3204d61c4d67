-- A run's blob and meta hash, read together.
-- KEYS: run blob, run meta
local blob = redis.call('GET', KEYS[1])
if not blob then return false end
return {blob, redis.call('HGETALL', KEYS[2])}
