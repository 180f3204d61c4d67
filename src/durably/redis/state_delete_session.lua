-- Delete a session; refuse while one of its runs is live unless cascading to its runs.
-- KEYS: session hash, session run set, tenant run index
-- ARGV: tenant prefix, cascade ('1' or '0'), then the terminal run states
if redis.call('EXISTS', KEYS[1]) == 0 then return {'absent'} end
local prefix = ARGV[1]
local terminal = {}
for i = 3, #ARGV do terminal[ARGV[i]] = true end
local ids = redis.call('SMEMBERS', KEYS[2])
local live, seqs = {}, {}
for _, id in ipairs(ids) do
  local meta = redis.call('HMGET', prefix .. 'meta:' .. #id .. ':' .. id, 'state', 'seq')
  if meta[1] and not terminal[meta[1]] then
    live[#live + 1] = id
    seqs[id] = tonumber(meta[2])
  end
end
if ARGV[2] ~= '1' then
  if #live > 0 then
    -- Named in creation order, as every backing names them.
    table.sort(live, function(a, b) return seqs[a] < seqs[b] end)
    table.insert(live, 1, 'in_use')
    return live
  end
else
  for _, id in ipairs(ids) do
    local seg = #id .. ':' .. id
    redis.call('DEL', prefix .. 'run:' .. seg, prefix .. 'meta:' .. seg)
    redis.call('ZREM', KEYS[3], id)
  end
  redis.call('DEL', KEYS[2])
end
redis.call('DEL', KEYS[1])
return {'deleted'}
