-- Delete every record and the status, and raise the fence, in one step.
-- KEYS: claim, token, records, written, status, admitted. ARGV: ttl (ms, 0 = none)
-- Answers {count deleted, tenant, running, gate, move} (unadmit).
local now = now_us()
local count = redis.call('HLEN', KEYS[3])
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[1])
local gone = unadmit(KEYS[6])
next_token(KEYS[2], now)
-- SET dropped the token key's expiry: re-arm it, or under a ttl it would outlive the rest.
rearm(ARGV[1], KEYS[2])
announce(KEYS[2], 'e')
return {count, gone[1], gone[2], gone[3], gone[4]}
