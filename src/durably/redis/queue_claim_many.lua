-- Up to ARGV[6] claims in one script, each exactly as queue_claim.lua makes it (so the
-- items come in the order that many single claims would take them). It stops early when a
-- claim finds nothing, and after a claim that promoted delayed tenants (that one's work is
-- bounded by PROMOTE, and so is the script's). KEYS: the queue's rotation set. ARGV:
-- prefix, queue, worker, now, lease_expires_at, the most items to take, then the
-- priorities, highest first. Returns the items taken, each as queue_claim.lua returns it.
local queue, worker, now, expires = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local priorities = {unpack(ARGV, 7)}
local taken = {}
for _ = 1, tonumber(ARGV[6]) do
  local f, promoted = claim(queue, worker, now, expires, priorities)
  if not f then break end
  taken[#taken + 1] = f
  if promoted > 0 then break end
end
return taken
