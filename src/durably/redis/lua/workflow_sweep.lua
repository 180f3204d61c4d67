-- Sweep one workflow for the retention sweep, if it is still finished, older than the
-- cutoff and held by no live pass. KEYS: claim, token, records, written, seq, status,
-- admitted. ARGV: cutoff (us), grace (ms), then every finished status.
-- Answers {0} (not swept) or {1, tenant, running, gate, move} (unadmit).
local now = now_us()
local s = redis.call('HMGET', KEYS[6], 'status', 'updated_at')
if not s[1] or tonumber(s[2]) >= tonumber(ARGV[1]) then return {0} end
local finished = false
for i = 3, #ARGV do
  if s[1] == ARGV[i] then finished = true end
end
if not finished then return {0} end
local alive_until = redis.call('HGET', KEYS[1], 'alive_until')
if alive_until and tonumber(alive_until) > now then return {0} end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
local gone = unadmit(KEYS[7])
-- Raise the fence (a stale pass's write is refused), then let the token key go only once
-- the clock has passed it by the grace: a later claim's hybrid logical clock then still
-- starts above every token handed out before.
local token = next_token(KEYS[2], now)
redis.call('PEXPIRE', KEYS[2], math.max(0, token - math.floor(now / 1000)) + tonumber(ARGV[2]))
return {1, gone[1], gone[2], gone[3], gone[4]}
