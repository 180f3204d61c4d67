-- Delete a debounce slot once the workflow it names began (its arguments recorded) or
-- ended unbegun. KEYS: the slot's hash. ARGV: prefix, workflow. Returns 1 when deleted,
-- 0 when the slot is gone or names another workflow (a later start's).
if redis.call('HGET', KEYS[1], 'workflow') ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1
