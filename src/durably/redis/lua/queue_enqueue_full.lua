-- Queue an item unless a live one holds its id or dedupe key: every case of an enqueue
-- (enqueue_item in queue_enqueue_lib.lua). queue_enqueue.lua takes the common one
-- (nothing under the id, no dedupe key, nothing carried) in fewer steps and hands the rest
-- here, with the same arguments.
-- KEYS: item hash. ARGV: prefix, tenant, member (the 16-digit enqueue order, then the id:
-- see order.py), queue, payload (JSON), priority, now, the enqueue's token (one per call,
-- kept in the item), then optionally available_at ('' or absent: now), a dedupe key (''
-- or absent: none), the attempts and failures (segments) the item already carries ('' or
-- absent: 0 and none), the dedupe key's time to live ('' or absent: none), and its flow
-- gates: concurrency key and limit, throttle key, interval and burst ('' or absent: none).
-- Answers 1 when queued, or the live (or kept) holder's item.
local available, dedupe, attempts, failures, ttl = ARGV[9], ARGV[10], ARGV[11], ARGV[12],
  ARGV[13]
if available == '' then available = nil end
if dedupe == '' then dedupe = nil end
if attempts == '' then attempts, failures = nil, nil end
if ttl == '' then ttl = nil end
local gates = nil
if (ARGV[14] and ARGV[14] ~= '') or (ARGV[16] and ARGV[16] ~= '') then
  gates = {ARGV[14], ARGV[15], ARGV[16], ARGV[17], ARGV[18]}
end
return enqueue_item(KEYS[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8],
  available, dedupe, attempts, failures, ttl, gates)
