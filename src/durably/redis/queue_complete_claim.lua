-- Finish some of the holder's items, then claim up to a number of items for it, in one
-- step: each completion as queue_complete.lua makes it, then the claims as
-- queue_claim_many.lua makes them (so the worker never holds more than before, even for a
-- moment). KEYS: the queue's rotation set. ARGV: prefix, queue, worker, now,
-- lease_expires_at, retention, the most items to claim, the number of refs n, the n refs,
-- then the priorities, highest first. Returns {what queue_complete.lua returns per ref,
-- the items claimed}.
local queue, worker, now, expires = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local retention, limit, count = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local done, taken = {}, {}
for i = 9, 8 + count do
  done[#done + 1] = complete(ARGV[i], worker, tonumber(now), retention)
end
local priorities = {unpack(ARGV, 9 + count)}
for _ = 1, limit do
  local f, promoted = claim(queue, worker, now, expires, priorities)
  if not f then break end
  taken[#taken + 1] = f
  if promoted > 0 then break end
end
return {done, taken}
