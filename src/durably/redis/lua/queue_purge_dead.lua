-- Delete dead letters of a queue from one window of a dead-letter set, with the dedupe
-- keys they keep. KEYS: the set walked: the queue's dead letters ('all'), the tenant's of
-- every queue ('tenant'), or ('item') the queue registry, naming the queues' slot.
-- ARGV: prefix, queue, mode ('all' | 'tenant' | 'item'), the item's ref ('item'), the
-- window's cursor (score, '' for the first, and ref: the window starts after it), its
-- length.
-- Answers {deleted, the next window's cursor score and ref}, the score '' once the set is
-- walked. The window starts after the last entry looked at, kept or deleted, so entries
-- another caller adds or removes meanwhile shift nothing: a dead letter that was there
-- when the walk started and stays is looked at; one landing during it is looked at or
-- not, whole either way (each is read and deleted in one script).
local queue, mode, look = ARGV[2], ARGV[3], tonumber(ARGV[7])
local entries
if mode == 'item' then
  entries = {{0, ARGV[4]}}
else
  entries = following(KEYS[1], look, ARGV[5], ARGV[6])
end
local deleted = 0
for _, entry in ipairs(entries) do
  local ref = entry[2]
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
if mode == 'item' or #entries < look then return {deleted, '', ''} end
local last = entries[#entries]
return {deleted, cursor(last), last[2]}
