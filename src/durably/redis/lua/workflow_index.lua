-- Keep the status index (ordered by workflow id, byte order = code-point order) in step.
-- KEYS: the index of every status. ARGV: index prefix, workflow, new status or '', then
-- every status
local prefix, workflow, status = ARGV[1], ARGV[2], ARGV[3]
for i = 4, #ARGV do redis.call('ZREM', prefix .. ARGV[i], workflow) end
if status == '' then
  redis.call('ZREM', KEYS[1], workflow)
else
  redis.call('ZADD', KEYS[1], 0, workflow)
  redis.call('ZADD', prefix .. status, 0, workflow)
end
return 1
