-- The status and the records asked for, read at once. KEYS: status, records. ARGV: the
-- number n of status fields, those n fields, then the record keys.
local n = tonumber(ARGV[1])
local found = {}
if #ARGV > n + 1 then
  found = redis.call('HMGET', KEYS[2], unpack(ARGV, n + 2))
end
return {redis.call('HMGET', KEYS[1], unpack(ARGV, 2, n + 1)), found}
