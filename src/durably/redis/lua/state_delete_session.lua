-- Delete a session: without cascade, once state_session_live found none of its runs live;
-- with cascade, together with its runs.
-- KEYS: session hash, session run set, tenant run index, the session's set of runs being
-- deleted, the session's write mark. ARGV: cascade ('1' or '0'), the write mark the look
-- for live runs began with (without cascade).
-- Without cascade it answers 'changed', deleting nothing, if a run was written into the
-- session since that look began (the caller looks again). A cascade deletes the session at
-- once and moves its run set aside ('deleted'); state_delete_session_runs then deletes
-- those runs in bounded batches. While an earlier cascade's runs are still being deleted,
-- it answers 'pending' and changes nothing.
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[4]) == 1 then return {'pending'} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'absent'} end
if ARGV[1] ~= '1' then
  if (redis.call('GET', KEYS[5]) or '0') ~= ARGV[2] then return {'changed'} end
elseif redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[4])
end
redis.call('DEL', KEYS[1], KEYS[5])
return {'deleted'}
