-- Record the holder's failed attempt. KEYS: item hash.
-- ARGV: prefix, ref, worker, now, error, then the requeue instants (see settle), or 'at'
-- and the one instant to requeue at whatever the attempts (the caller's policy decided).
local item, ref, worker, now = KEYS[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local f = read_item(item)
local lost = not_held(f, worker, now, nil)
if lost then return lost end
local due = {}
if ARGV[6] == 'at' then
  for i = 1, (tonumber(f[ATTEMPTS]) or 0) + 1 do due[i] = ARGV[7] end
else
  for i = 6, #ARGV do due[#due + 1] = ARGV[i] end
end
return {'ok', settle(ref, f, ARGV[5], due, now)}
