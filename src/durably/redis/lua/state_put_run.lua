-- Compare-and-set write of a run: blob, meta hash, creation sequence, session index, the
-- session's write mark, the tenant's totals (the run as it was out, as it is now in) and
-- the tenant's hash of the runs following workflows (`follows`, among the counters).
-- KEYS: run blob, run meta, tenant sequence, tenant run index (zset by sequence), totals
-- ARGV: tenant prefix, run id, expected version, blob, state, updated_at, session id or '',
--       the write's token (one per put_run call, kept with the version), then field/value
--       pairs of the counters the record carries
local current = tonumber(redis.call('HGET', KEYS[2], 'version') or '0')
if current ~= tonumber(ARGV[3]) then
  -- A retry of this very write, whose reply was lost with the connection, is no conflict.
  if current == tonumber(ARGV[3]) + 1 and redis.call('HGET', KEYS[2], 'write') == ARGV[8] then
    return {'ok'}
  end
  return {'conflict', tostring(current)}
end
local prefix, run_id, session = ARGV[1], ARGV[2], ARGV[7]
local function seg(s) return #s .. ':' .. s end
local old_session = redis.call('HGET', KEYS[2], 'session')
if current == 0 then
  -- The creation sequence is assigned once: an update never moves a run in listings.
  local seq = redis.call('INCR', KEYS[3])
  redis.call('ZADD', KEYS[4], seq, run_id)
  redis.call('HSET', KEYS[2], 'seq', seq)
end
count_run(KEYS[5], KEYS[2], '-')
unfollow(prefix, KEYS[2], run_id)
redis.call('SET', KEYS[1], ARGV[4])
redis.call('HSET', KEYS[2], 'version', current + 1, 'state', ARGV[5],
  'updated_at', ARGV[6], 'session', session, 'write', ARGV[8])
for i = 9, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
count_run(KEYS[5], KEYS[2], '')
follow(prefix, KEYS[2], run_id)
if old_session and old_session ~= '' and old_session ~= session then
  redis.call('SREM', prefix .. 'session-runs:' .. seg(old_session), run_id)
end
if session ~= '' then
  redis.call('SADD', prefix .. 'session-runs:' .. seg(session), run_id)
  -- The session's write mark (never repeated in the tenant): a delete_session without
  -- cascade that looked for live runs before this write looks again.
  redis.call('SET', prefix .. 'session-mark:' .. seg(session),
    redis.call('INCR', prefix .. 'run-writes'))
end
return {'ok'}
