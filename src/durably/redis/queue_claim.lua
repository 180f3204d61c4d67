-- Take one due item, in one step: tenants in rotation (lowest turn, ties to the oldest
-- due item), then priority, availability and enqueue order within the tenant.
-- KEYS: the queue's active-tenant set, and for a waiting claim the list its wait moved a
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
local tenants = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local best = nil
for i = 1, #tenants, 2 do
  local tenant, turn = tenants[i], tonumber(tenants[i + 1])
  if best and turn > best.turn then break end
  -- Alone at its turn (the list is sorted by turn), a tenant with a due item wins outright:
  -- its highest-priority item is enough, with no oldest item to compare against others.
  local alone = not best and (not tenants[i + 3] or tonumber(tenants[i + 3]) > turn)
  local pick, oldest_at, oldest_member = nil, nil, nil
  for p = 6, #ARGV do
    local hit = redis.call('ZRANGEBYSCORE', ready_key(queue, tenant, ARGV[p]), '-inf', now,
      'WITHSCORES', 'LIMIT', 0, 1)
    if hit[1] then
      local at = tonumber(hit[2])
      if not pick then pick = {priority = ARGV[p], member = hit[1]} end
      if not oldest_at or at < oldest_at or (at == oldest_at and hit[1] < oldest_member) then
        oldest_at, oldest_member = at, hit[1]
      end
      if alone then break end
    end
  end
  if pick then
    local seq = string.sub(oldest_member, 1, 16)
    if not best or turn < best.turn or oldest_at < best.at
        or (oldest_at == best.at and seq < best.seq) then
      best = {tenant = tenant, turn = turn, at = oldest_at, seq = seq,
        priority = pick.priority, member = pick.member}
    end
  end
end
if not best then return false end
local id = string.sub(best.member, 17)
local ref = seg(best.tenant) .. seg(id)
local item = item_key(ref)
-- The served tenant goes to the back of the rotation.
local turn = redis.call('INCR', qkey('turn', queue))
remove_ready(queue, best.tenant, best.priority, best.member, {unpack(ARGV, 6)}, turn)
local f = read_item(item)
if not f[FIRST_CLAIMED] or f[FIRST_CLAIMED] == '' then
  f[FIRST_CLAIMED] = now
  redis.call('HSET', item, 'state', 'claimed', 'worker', worker, 'claimed_at', now,
    'lease_expires_at', expires, 'first_claimed_at', now)
else
  redis.call('HSET', item, 'state', 'claimed', 'worker', worker, 'claimed_at', now,
    'lease_expires_at', expires)
end
redis.call('ZADD', qkey('leases', queue), expires, ref)
redis.call('SADD', base .. 'held:' .. seg(worker), ref)
f[STATE], f[WORKER], f[CLAIMED], f[LEASE] = 'claimed', worker, now, expires
return f
