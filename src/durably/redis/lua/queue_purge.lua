-- Delete the queued items of up to ``most`` tenants of a queue (claimed items and dead
-- letters stay), with their dedupe keys, and take those tenants out of the rotation (a
-- served tenant keeps its turn). KEYS: the queue registry. ARGV: prefix, queue, tenant
-- ('': every tenant), most, then the priorities.
-- Answers {items deleted, tenants left to purge (0 when done)}.
local queue, only, most = ARGV[2], ARGV[3], tonumber(ARGV[4])
local priorities = {}
for i = 5, #ARGV do priorities[#priorities + 1] = ARGV[i] end
local heads = qkey('heads', queue)
local tenants
if only ~= '' then tenants = {only} else tenants = redis.call('ZRANGE', heads, 0, most - 1) end
local deleted = 0
for _, tenant in ipairs(tenants) do
  for _, p in ipairs(priorities) do
    local ready = ready_key(queue, tenant, p)
    for _, member in ipairs(redis.call('ZRANGE', ready, 0, -1)) do
      local item = item_key(seg(tenant) .. seg(string.sub(member, 17)))
      forget_dedupe(read_item(item))
      redis.call('DEL', item)
      deleted = deleted + 1
    end
    redis.call('DEL', ready)
  end
  redis.call('ZREM', heads, tenant)
  local turn = redis.call('ZSCORE', qkey('rota', queue), tenant)
  if turn then
    redis.call('HSET', qkey('turns', queue), tenant, turn)
    redis.call('ZREM', qkey('rota', queue), tenant)
  end
  redis.call('ZREM', qkey('waiting', queue), tenant)
  local fresh = redis.call('HGET', qkey('fresh-of', queue), tenant)
  if fresh then
    redis.call('ZREM', qkey('fresh', queue), fresh)
    redis.call('HDEL', qkey('fresh-of', queue), tenant)
  end
end
if deleted > 0 then redis.call('HINCRBY', qkey('stats', queue), 'depth', -deleted) end
local left = 0
if only == '' then left = redis.call('ZCARD', heads) end
return {deleted, left}
