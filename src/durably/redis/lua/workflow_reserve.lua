-- Reserve one running and one started workflow in a tenant's counts, unless a cap is
-- reached. KEYS: the tenant's counts. ARGV: running cap, started cap ('' = none).
-- Answers {reserved (1/0), running, started} as they were before.
local c = redis.call('HMGET', KEYS[1], 'running', 'started')
local running, started = tonumber(c[1] or '0'), tonumber(c[2] or '0')
if (ARGV[1] ~= '' and running >= tonumber(ARGV[1]))
    or (ARGV[2] ~= '' and started >= tonumber(ARGV[2])) then
  return {0, running, started}
end
redis.call('HINCRBY', KEYS[1], 'running', 1)
redis.call('HINCRBY', KEYS[1], 'started', 1)
return {1, running, started}
