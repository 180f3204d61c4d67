-- Take one due item, in one step: tenants in rotation (lowest turn, ties to the oldest
-- due item), then priority, availability and enqueue order within the tenant. Reads the
-- first of the rotation's sorted sets (queue_lib.lua), never every tenant.
-- KEYS: the queue's rotation set, and for a waiting claim the list its wait moved a
-- doorbell ring into. ARGV: prefix, queue, worker, now, lease_expires_at, then the
-- priorities, highest first.
local queue, worker, now, expires = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if KEYS[2] then
  -- A waiting claim was sent before it waited: its ``now`` is as old as the wait. The
  -- ring it was woken by carries an instant at which the rung item is due (a later
  -- reading of the ringer's clock), so the claim happens as of then, lease and all.
  local rung = redis.call('LPOP', KEYS[2])
  redis.call('DEL', KEYS[2])
  if rung and tonumber(rung) and tonumber(rung) > tonumber(now) then
    expires = string.format('%.17g', tonumber(rung) + (tonumber(expires) - tonumber(now)))
    now = rung
  end
end
return (claim(queue, worker, now, expires, {unpack(ARGV, 6)}))
