-- A debounced workflow takes its slot if it is due (or took it before). KEYS: the slot's
-- hash. ARGV: prefix, workflow, now. Returns {args or false, false} when taken,
-- {false, due} when a later start pushed it back, {false, false} when the slot names
-- another workflow.
local held = redis.call('HMGET', KEYS[1], 'workflow', 'args', 'due', 'begun')
if held[1] ~= ARGV[2] then return {false, false} end
if held[4] ~= '1' and tonumber(held[3]) > tonumber(ARGV[3]) then return {false, held[3]} end
redis.call('HSET', KEYS[1], 'begun', '1')
return {held[2], false}
