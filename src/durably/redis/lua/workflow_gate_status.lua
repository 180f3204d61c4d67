-- The status of a workflow its gate queued or admitted (never run: no attempts, no error),
-- written over no status or the one expected only. KEYS: status. ARGV: status, expected
-- ('' = none), ttl (ms). Answers 1 if written.
local current = redis.call('HGET', KEYS[1], 'status')
if current and current ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'attempts', '0', 'has_error', '0',
  'error', '', 'updated_at', fmt(now_us()))
rearm(ARGV[3], KEYS[1])
return 1
