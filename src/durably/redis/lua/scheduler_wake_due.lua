-- Every sleeping entry due at or before ``now`` (caller's clock) rejoins its tenant's line,
-- visible now. KEYS: legacy ready set. ARGV: prefix, default tenant, now
local due = redis.call('ZRANGEBYSCORE', sleeping, '-inf', ARGV[3])
local now = now_us()
for _, workflow in ipairs(due) do queue(workflow, owner(workflow), now) end
if due[1] then ring() end
return #due
