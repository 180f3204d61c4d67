-- Give back at once everything one worker holds. KEYS: the worker's held set.
-- ARGV: prefix, now, error, then the requeue instants. Returns the items moved.
local now = tonumber(ARGV[2])
local due = {}
for i = 4, #ARGV do due[#due + 1] = ARGV[i] end
local moved = {}
for _, ref in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local f = read_item(item_key(ref))
  moved[#moved + 1] = settle(ref, f, ARGV[3], carried_due(f, due, now, true), now)
end
return moved
