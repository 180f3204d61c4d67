-- Queue several items in one script, each as queue_enqueue_full.lua queues one.
-- KEYS: the item hashes, in order. ARGV: prefix, now, the dedupe keys' time to live ('':
-- none), then per item fifteen fields: tenant, member, queue, payload, priority, token,
-- available_at ('': now), dedupe key ('': none), attempts and failures ('' for both: none
-- carried), and the flow gates: concurrency key and limit, throttle key, interval and
-- burst ('' for a key: no gate).
-- Answers, per item in order, 1 when queued or the live holder's item.
local now, ttl = ARGV[2], ARGV[3]
if ttl == '' then ttl = nil end
local answers = {}
for i = 1, #KEYS do
  local at = 3 + (i - 1) * 15
  local available, dedupe, attempts, failures = ARGV[at + 7], ARGV[at + 8], ARGV[at + 9],
    ARGV[at + 10]
  if available == '' then available = nil end
  if dedupe == '' then dedupe = nil end
  if attempts == '' then attempts, failures = nil, nil end
  local gates = nil
  if ARGV[at + 11] ~= '' or ARGV[at + 13] ~= '' then
    gates = {ARGV[at + 11], ARGV[at + 12], ARGV[at + 13], ARGV[at + 14], ARGV[at + 15]}
  end
  answers[i] = enqueue_item(KEYS[i], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4],
    ARGV[at + 5], now, ARGV[at + 6], available, dedupe, attempts, failures, ttl, gates)
end
return answers
