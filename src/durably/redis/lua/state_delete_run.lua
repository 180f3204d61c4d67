-- Delete a run and take it out of its session index, the listing, the tenant's totals and
-- the runs following workflows.
-- KEYS: run blob, run meta, tenant run index, totals. ARGV: tenant prefix, run id
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local session = redis.call('HGET', KEYS[2], 'session')
if session and session ~= '' then
  redis.call('SREM', ARGV[1] .. 'session-runs:' .. #session .. ':' .. session, ARGV[2])
end
count_run(KEYS[4], KEYS[2], '-')
unfollow(ARGV[1], KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
