-- Report the workflow's status under the fence. KEYS: claim, token, status, admitted.
-- ARGV: token, status, attempts, has error ('1'/'0'), error, ttl (ms), running ('1'/'0').
-- Answers {'fenced'} or {'ok', updated_at, tenant, running delta, gate, move} (flip_admitted).
if current_token(KEYS[2]) ~= tonumber(ARGV[1]) then return {'fenced'} end
local now = now_us()
redis.call('HSET', KEYS[3], 'status', ARGV[2], 'attempts', ARGV[3], 'has_error', ARGV[4],
  'error', ARGV[5], 'updated_at', fmt(now))
local moved = flip_admitted(KEYS[4], ARGV[7])
rearm(ARGV[6], KEYS[2], KEYS[3])
-- Only a report that ends the workflow is announced (the finished statuses).
if ARGV[2] == 'completed' or ARGV[2] == 'failed' or ARGV[2] == 'cancelled' then
  announce(KEYS[3], 'e')
end
return {'ok', fmt(now), moved[1], moved[2], moved[3], moved[4]}
