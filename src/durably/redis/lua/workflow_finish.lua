-- Write a record and report a status in one script, under one fence: record then
-- set_status (COMPLETED, from `finish`), neither if superseded.
-- KEYS: claim, token, records, written, seq, status, admitted.
-- ARGV: token, key, encoded value, status, attempts, has error ('1'/'0'), error, ttl (ms),
-- running ('0').
-- Answers {'fenced'}, or {'ok', updated_at, tenant, running delta, gate, move}; the record is
-- first-writer-wins (a value already under the key is kept).
if current_token(KEYS[2]) ~= tonumber(ARGV[1]) then return {'fenced'} end
local now = now_us()
insert(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], now)
touch(KEYS[1], ARGV[1], now)
redis.call('HSET', KEYS[6], 'status', ARGV[4], 'attempts', ARGV[5], 'has_error', ARGV[6],
  'error', ARGV[7], 'updated_at', fmt(now))
local moved = flip_admitted(KEYS[7], ARGV[9])
rearm(ARGV[8], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
announce(KEYS[6], 'e')
return {'ok', fmt(now), moved[1], moved[2], moved[3], moved[4]}
