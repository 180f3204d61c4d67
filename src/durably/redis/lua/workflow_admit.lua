-- First-writer-wins write of a start record from outside any pass; a first one is marked
-- admitted under its tenant (the caller reserved its count). KEYS: records, written, seq,
-- token, status, admitted. ARGV: key, encoded value, ttl (ms), tenant, gate ('' = none).
-- Answers {value, first (1/0), counted (1/0)}.
local result = insert(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], now_us())
local counted = 0
if result[2] == 1 and redis.call('EXISTS', KEYS[6]) == 0 then
  redis.call('HSET', KEYS[6], 'tenant', ARGV[4], 'running', '1')
  if ARGV[5] and ARGV[5] ~= '' then redis.call('HSET', KEYS[6], 'gate', ARGV[5]) end
  counted = 1
end
rearm(ARGV[3], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return {result[1], result[2], counted}
