-- One workflow of a batched cancel (durably.stores.cancelling): its marker, and its
-- cancelled end when no pass runs it. KEYS: claim, token, records, written, seq, status,
-- admitted. ARGV: marker key, marker value, end key, end value, superseding key, error,
-- the cancelled status, ttl (ms), how many statuses n a cancel ends itself, those n, then
-- the finished statuses.
-- Answers {'finished', status} (nothing written), {'open', status or '', first, held}
-- (the marker alone), or {'ended', status or '', first, 0, updated_at, then what
-- flip_admitted answers} (the end written, under a claim taken and released at once).
local n = tonumber(ARGV[9])
local status = redis.call('HGET', KEYS[6], 'status')
for i = 10 + n, #ARGV do
  if status == ARGV[i] then return {'finished', status} end
end
local now = now_us()
local first = insert(KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], now)[2]
rearm(ARGV[8], KEYS[3], KEYS[4], KEYS[5], KEYS[2], KEYS[6])
if first == 1 then announce(KEYS[3], 'r') end
local alive_until = redis.call('HGET', KEYS[1], 'alive_until')
local held = alive_until and tonumber(alive_until) > now
local endable = not status
for i = 10, 9 + n do
  if status == ARGV[i] then endable = true end
end
if held or not endable or redis.call('HEXISTS', KEYS[3], ARGV[5]) == 1 then
  return {'open', status or '', first, held and 1 or 0}
end
-- A claim taken and released at once: a lapsed pass is fenced out, as a claim fences it.
next_token(KEYS[2], now)
redis.call('DEL', KEYS[1])
insert(KEYS[3], KEYS[4], KEYS[5], ARGV[3], ARGV[4], now)
local attempts = redis.call('HGET', KEYS[6], 'attempts') or '0'
redis.call('HSET', KEYS[6], 'status', ARGV[7], 'attempts', attempts, 'has_error', '1',
  'error', ARGV[6], 'updated_at', fmt(now))
local moved = flip_admitted(KEYS[7], '0')
rearm(ARGV[8], KEYS[2], KEYS[6])
announce(KEYS[6], 'e')
return {'ended', status or '', first, 0, fmt(now), moved[1], moved[2], moved[3], moved[4]}
