-- Give back at once everything one worker holds. KEYS: the worker's held set.
-- ARGV: prefix, now, error, then the requeue instants
local now = tonumber(ARGV[2])
local due = {}
for i = 4, #ARGV do due[#due + 1] = ARGV[i] end
local held = redis.call('SMEMBERS', KEYS[1])
for _, ref in ipairs(held) do settle(ref, read_item(item_key(ref)), ARGV[3], due, now) end
return #held
