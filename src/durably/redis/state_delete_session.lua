-- Delete a session; refuse while one of its runs is live unless cascading to its runs.
-- KEYS: session hash, session run set, tenant run index, the session's set of runs being
-- deleted. ARGV: tenant prefix, cascade ('1' or '0'), then the terminal run states.
-- A cascade deletes the session at once and moves its run set aside ('deleted');
-- state_delete_session_runs then deletes those runs in bounded batches. While an earlier
-- cascade's runs are still being deleted, it answers 'pending' and changes nothing.
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[4]) == 1 then return {'pending'} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'absent'} end
local prefix = ARGV[1]
local terminal = {}
for i = 3, #ARGV do terminal[ARGV[i]] = true end
if ARGV[2] ~= '1' then
  local live, seqs = {}, {}
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local meta = redis.call('HMGET', prefix .. 'meta:' .. #id .. ':' .. id, 'state', 'seq')
    if meta[1] and not terminal[meta[1]] then
      live[#live + 1] = id
      seqs[id] = tonumber(meta[2])
    end
  end
  if #live > 0 then
    -- Named in creation order, as every backing names them.
    table.sort(live, function(a, b) return seqs[a] < seqs[b] end)
    table.insert(live, 1, 'in_use')
    return live
  end
elseif redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[4])
end
redis.call('DEL', KEYS[1])
return {'deleted'}
