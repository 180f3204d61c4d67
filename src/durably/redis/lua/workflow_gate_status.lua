-- The status of a workflow its gate queued or admitted (never run: no attempts, no error),
-- written over no status or the one expected only. KEYS: status. ARGV: status, expected
-- ('' = none), ttl (ms). Answers the status's time (microseconds) if written, else 0.
local current = redis.call('HGET', KEYS[1], 'status')
if current and current ~= ARGV[2] then return 0 end
local now = fmt(now_us())
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'attempts', '0', 'has_error', '0',
  'error', '', 'updated_at', now)
rearm(ARGV[3], KEYS[1])
return now
