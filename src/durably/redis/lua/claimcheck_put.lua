-- Keep a claim-check blob; equal content is one key, and a second put never shortens its
-- life. KEYS: blob. ARGV: data, expires_at (the store's clock; "inf" for never), lifetime
-- in ms ("" for never): how long the server itself keeps the key.
local held = redis.call('HGET', KEYS[1], 'expires_at')
if held then
  if tonumber(held) >= tonumber(ARGV[2]) then
    return 0
  end
  redis.call('HSET', KEYS[1], 'expires_at', ARGV[2])
else
  redis.call('HSET', KEYS[1], 'data', ARGV[1], 'expires_at', ARGV[2])
end
if ARGV[3] == '' then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
