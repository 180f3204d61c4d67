-- A status write of a workflow moved the run record following it (durably.stores.runs.FOLLOWS)
-- to a run state: taken only by a run whose meta names that workflow, and only when its
-- state changes; a new version (the run's own time kept), its totals out of the old state
-- and into the new. Answers 1 if the run moved.
-- KEYS: run meta, totals. ARGV: workflow, run state.
if redis.call('HGET', KEYS[1], 'follows') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'state') == ARGV[2] then return 0 end
count_run(KEYS[2], KEYS[1], '-')
redis.call('HSET', KEYS[1], 'state', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'version', 1)
count_run(KEYS[2], KEYS[1], '')
return 1
