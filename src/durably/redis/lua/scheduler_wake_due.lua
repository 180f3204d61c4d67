-- Every sleeping entry due at or before ``now`` (caller's clock) becomes ready now.
-- KEYS: ready. ARGV: prefix, now
local due = redis.call('ZRANGEBYSCORE', sleeping, '-inf', ARGV[2])
local now = now_us()
for _, workflow in ipairs(due) do make_ready(workflow, now) end
return #due
