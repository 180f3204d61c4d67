-- Delete up to a batch of the runs a cascading delete_session moved aside, so that no one
-- script holds the server for long. A run that moved to another session since is kept.
-- KEYS: the session's set of runs being deleted, tenant run index, tenant totals.
-- ARGV: tenant prefix, session id, batch size. Returns how many runs are left to delete.
local prefix = ARGV[1]
for _, id in ipairs(redis.call('SPOP', KEYS[1], tonumber(ARGV[3]))) do
  local seg = #id .. ':' .. id
  local meta = prefix .. 'meta:' .. seg
  if redis.call('HGET', meta, 'session') == ARGV[2] then
    count_run(KEYS[3], meta, '-')
    unfollow(prefix, meta, id)
    redis.call('DEL', prefix .. 'run:' .. seg, meta)
    redis.call('ZREM', KEYS[2], id)
  end
end
return redis.call('SCARD', KEYS[1])
