-- Up to ARGV[6] claims in one script, each exactly as queue_claim.lua makes it (so the
-- items come in the order that many single claims would take them; see claim_up_to).
-- KEYS: the queue's rotation set. ARGV: prefix, queue, worker, now, lease_expires_at, the
-- most items to take, then the priorities, highest first. Returns the items taken, each
-- as queue_claim.lua returns it.
return claim_up_to(tonumber(ARGV[6]), ARGV[2], ARGV[3], ARGV[4], ARGV[5], {unpack(ARGV, 7)})
