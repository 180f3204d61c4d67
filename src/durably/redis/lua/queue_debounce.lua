-- A start with a debounce slot (durably.stores.debounce): a pending workflow of the slot
-- (not begun) takes the arguments and the due time; none pending, the slot names the given
-- workflow. KEYS: the slot's hash. ARGV: prefix, workflow, args, due.
-- Returns the pending workflow's id.
local held = redis.call('HMGET', KEYS[1], 'workflow', 'begun')
if held[1] and held[2] ~= '1' then
    redis.call('HSET', KEYS[1], 'args', ARGV[3], 'due', ARGV[4])
    return held[1]
end
redis.call('HSET', KEYS[1], 'workflow', ARGV[2], 'args', ARGV[3], 'due', ARGV[4], 'begun', '0')
return ARGV[2]
