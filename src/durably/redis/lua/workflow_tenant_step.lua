-- A status write's step in the workflow's tenant's slot, run beside the status index's
-- step: the tenant's counts of admitted workflows move, and the run record following the
-- workflow (durably.stores.runs.FOLLOWS), found in the tenant's `following` hash, moves
-- to the new run state. A run moves only if its meta names this workflow, never back to
-- a status older than the last it followed (`followed`: the status's time, microseconds
-- as text; the steps of two writes may land in either order), and only when its state
-- changes: a new version, its totals out of the old state and into the new.
-- KEYS: the tenant's counts, its following runs, its totals. ARGV: running delta, started
-- delta, tenant prefix, workflow, run state ('' when the workflow is gone: no run moves),
-- the status's time ('' when not known). Answers 1 if a run moved, else 0.
if ARGV[1] ~= '0' then redis.call('HINCRBY', KEYS[1], 'running', ARGV[1]) end
if ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[1], 'started', ARGV[2]) end
local prefix, workflow, state, at = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if state == '' then return 0 end
local run = redis.call('HGET', KEYS[2], workflow)
if not run then return 0 end
local meta = prefix .. 'meta:' .. #run .. ':' .. run
if redis.call('HGET', meta, 'follows') ~= workflow then return 0 end
if at ~= '' then
  local seen = redis.call('HGET', meta, 'followed')
  if seen and tonumber(at) < tonumber(seen) then return 0 end
  redis.call('HSET', meta, 'followed', at)
end
if redis.call('HGET', meta, 'state') == state then return 0 end
count_run(KEYS[3], meta, '-')
redis.call('HSET', meta, 'state', state)
redis.call('HINCRBY', meta, 'version', 1)
count_run(KEYS[3], meta, '')
return 1
