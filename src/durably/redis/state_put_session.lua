-- Compare-and-set write of a session. KEYS: session hash. ARGV: expected version, blob
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then
  return {'conflict', tostring(current)}
end
redis.call('HSET', KEYS[1], 'version', current + 1, 'blob', ARGV[2])
return {'ok'}
