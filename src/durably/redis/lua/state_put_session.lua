-- Compare-and-set write of a session. KEYS: session hash. ARGV: expected version, blob,
-- the write's token (one per put_session call, kept with the version)
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then
  -- A retry of this very write, whose reply was lost with the connection, is no conflict.
  if current == tonumber(ARGV[1]) + 1 and redis.call('HGET', KEYS[1], 'write') == ARGV[3] then
    return {'ok'}
  end
  return {'conflict', tostring(current)}
end
redis.call('HSET', KEYS[1], 'version', current + 1, 'blob', ARGV[2], 'write', ARGV[3])
return {'ok'}
