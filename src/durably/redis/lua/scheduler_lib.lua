-- Shared by the scheduler scripts (prepended at load). KEYS[1] is always the ready set and
-- ARGV[1] the scheduler's key prefix (which carries its hash tag).
local prefix = ARGV[1]
local ready, sleeping = KEYS[1], prefix .. 'sleeping'
local receipts, taken = prefix .. 'receipts', prefix .. 'taken'
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end
local function ring()
  -- The doorbell an idle next_ready blocks on; bounded so nobody has to drain it.
  redis.call('LPUSH', prefix .. 'bell', '1')
  redis.call('LTRIM', prefix .. 'bell', 0, 63)
end
-- Ready and visible now, with no hand-out outstanding.
local function make_ready(workflow, now)
  redis.call('ZREM', sleeping, workflow)
  redis.call('ZADD', ready, fmt(now), workflow)
  redis.call('HDEL', receipts, workflow)
  redis.call('HDEL', taken, workflow)
  ring()
end
