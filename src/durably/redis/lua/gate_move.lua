-- A gated workflow's status crossed finished/unfinished (or it was deleted). KEYS: the
-- gate's meta. ARGV: gate prefix, workflow, finished ('1'/'0'), forget ('1'/'0'), the
-- crossing's number (the workflow's `moves`; '' for none: the workflow is gone).
-- A finished one frees its slot (or leaves the line) and the line's next take it; an
-- unfinished one that held none takes one (a resume, even past the limit). A crossing
-- numbered no higher than one taken already changes nothing: the repair pass and the
-- write's own step may both bring it, and a stale one must not undo a later one.
-- Answers whether it took the crossing (1/0), then the workflows admitted from the line,
-- flat: workflow, tenant, namespace, priority ('' for NORMAL), ...
local workflow, move = ARGV[2], tonumber(ARGV[5])
local out = {0}
local state = redis.call('HGET', marks, workflow)
if not state then return out end
if move then
  if move <= tonumber(redis.call('HGET', moved, workflow) or '0') then return out end
  redis.call('HSET', moved, workflow, move)
end
out[1] = 1
if ARGV[3] == '1' then
  if state == 'queued' then leave(workflow) end
  if state ~= 'free' then mark(workflow, 'free') end
  if state == 'held' then
    redis.call('HINCRBY', meta, 'admitted', -1)
    admit_next(out)
  end
elseif state ~= 'held' then
  if state == 'queued' then leave(workflow) end
  mark(workflow, 'held')
  redis.call('HINCRBY', meta, 'admitted', 1)
end
if ARGV[4] == '1' then
  mark(workflow, nil)
  redis.call('HDEL', moved, workflow)
  redis.call('HDEL', tenant_of, workflow)
  redis.call('HDEL', space_of, workflow)
  redis.call('HDEL', priority_of, workflow)
end
return out
