-- A cron schedule's last fired tick moves on, if the new one is later (durably.engine.
-- schedules). KEYS: the hash of every schedule's tick. ARGV: prefix, schedule, tick.
-- Returns {1 if it moved else 0, the tick kept before or false}.
local kept = redis.call('HGET', KEYS[1], ARGV[2])
if kept and tonumber(kept) >= tonumber(ARGV[3]) then return {0, kept} end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return {1, kept}
