-- Finish some of the holder's items, then claim up to a number of items for it, in one
-- step: each completion as queue_complete.lua makes it, then the claims as
-- queue_claim_many.lua makes them (so the worker never holds more than before, even for a
-- moment). KEYS: the queue's rotation set. ARGV: prefix, queue, worker, now,
-- lease_expires_at, retention, the most items to claim, the number of refs n, the n refs,
-- then the priorities, highest first. Returns {what queue_complete.lua returns per ref,
-- the items claimed}.
local queue, worker, now, expires = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local count = tonumber(ARGV[8])
local done = complete_refs(9, 8 + count, worker, tonumber(now), ARGV[6])
local priorities = {unpack(ARGV, 9 + count)}
return {done, claim_up_to(tonumber(ARGV[7]), queue, worker, now, expires, priorities)}
