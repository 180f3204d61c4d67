-- Move a workflow queued in the gate's line to another priority's place in its tenant's
-- line: the score is the priority's offset plus the serial it was queued with (kept, so
-- it stays behind the workflows of that priority queued before it). KEYS: the gate's
-- meta. ARGV: gate prefix, workflow, the priority's line offset, the priority ('' for
-- NORMAL). Answers 1, or 0 when the workflow is not queued in this gate.
local workflow = ARGV[2]
if redis.call('HGET', marks, workflow) ~= 'queued' then return 0 end
local tenant = redis.call('HGET', tenant_of, workflow)
local score = tenant and redis.call('ZSCORE', line(tenant), workflow)
if not score then return 0 end
local seq = tonumber(score) % 2251799813685248  -- 2^51: an offset's step
redis.call('ZADD', line(tenant), string.format('%.0f', tonumber(ARGV[3]) + seq), workflow)
if ARGV[4] ~= '' then
  redis.call('HSET', priority_of, workflow, ARGV[4])
else
  redis.call('HDEL', priority_of, workflow)
end
return 1
