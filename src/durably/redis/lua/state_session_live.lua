-- One bounded step of the look for a session's live runs that a delete_session without
-- cascade makes before deleting, so that no one script reads every run of a big session.
-- KEYS: the session hash, its run set, its write mark (set by every put_run into it).
-- ARGV: tenant prefix, SSCAN cursor, batch size, then the terminal run states.
-- Returns {'absent'} if there is no session; else the write mark ('0' if none), the next
-- cursor, then an id and a creation sequence for each live run of this step.
local prefix = ARGV[1]
local terminal = {}
for i = 4, #ARGV do terminal[ARGV[i]] = true end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'absent'} end
local step = redis.call('SSCAN', KEYS[2], ARGV[2], 'COUNT', tonumber(ARGV[3]))
local reply = {redis.call('GET', KEYS[3]) or '0', step[1]}
for _, id in ipairs(step[2]) do
  local meta = redis.call('HMGET', prefix .. 'meta:' .. #id .. ':' .. id, 'state', 'seq')
  if meta[1] and not terminal[meta[1]] then
    reply[#reply + 1] = id
    reply[#reply + 1] = meta[2]
  end
end
return reply
