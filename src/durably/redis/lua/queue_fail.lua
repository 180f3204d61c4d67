-- Record the holder's failed attempt. KEYS: item hash.
-- ARGV: prefix, ref, worker, now, error, then the requeue instants (see settle)
local item, ref, worker, now = KEYS[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local f = read_item(item)
local lost = not_held(f, worker, now, nil)
if lost then return lost end
local due = {}
for i = 6, #ARGV do due[#due + 1] = ARGV[i] end
return {'ok', settle(ref, f, ARGV[5], due, now)}
