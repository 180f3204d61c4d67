-- A gate's admitted and queued workflows. KEYS: the gate's meta. ARGV: gate prefix.
local queued = 0
for _, tenant in ipairs(redis.call('SMEMBERS', waiting)) do
  queued = queued + redis.call('ZCARD', line(tenant))
end
return {admitted(), queued}
