-- Delete dead letters of a queue from one window of a dead-letter set, with the dedupe
-- keys they keep. KEYS: the set walked: the queue's dead letters ('all'), the tenant's of
-- every queue ('tenant'), or ('item') the queue registry, naming the queues' slot. ARGV: prefix, queue, mode ('all' | 'tenant' |
-- 'item'), the item's ref ('item'), the window's start, its length.
-- Answers {deleted, where the next window starts, or -1 when the set is walked}.
local queue, mode, start, look = ARGV[2], ARGV[3], tonumber(ARGV[5]), tonumber(ARGV[6])
local refs
if mode == 'item' then
  refs = {ARGV[4]}
else
  refs = redis.call('ZRANGE', KEYS[1], start, start + look - 1)
end
local deleted = 0
for _, ref in ipairs(refs) do
  local item = item_key(ref)
  local f = read_item(item)
  if f[STATE] == 'dead_lettered' and f[QUEUE] == queue then
    if f[DEDUPE] and f[DEDUPE] ~= '' then
      local field = seg(f[TENANT]) .. seg(f[QUEUE]) .. seg(f[DEDUPE])
      if redis.call('HGET', base .. 'dedupe', field) == f[ID] then
        redis.call('HDEL', base .. 'dedupe', field)
        redis.call('ZREM', base .. 'dedupe-kept', field)
      end
    end
    redis.call('ZREM', qkey('dead', queue), ref)
    redis.call('ZREM', base .. 'dead-tenant:' .. seg(f[TENANT]), ref)
    redis.call('DEL', item)
    deleted = deleted + 1
  end
end
if mode == 'item' or #refs < look then return {deleted, -1} end
return {deleted, start + #refs - deleted}
