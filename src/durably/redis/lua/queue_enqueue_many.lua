-- Queue several items in one script: per item, what queue_enqueue_full.lua answers.
-- KEYS[1]: a key of the queue namespace (routing only). ARGV: prefix, now, the dedupe
-- keys' time to live ('': none), the call's token (kept in every item it writes), the
-- enqueue order number of the first item (the next items take the numbers after it), then
-- runs of items that share tenant, queue, priority and width: tenant, queue, priority,
-- width, count, and per item `width` fields:
--   2   id, payload: due at once, nothing else;
--   3   id, payload, available_at;
--   11  id, payload, available_at ('': now), dedupe key ('': none), attempts and failures
--       ('' for both: none carried), concurrency key and limit, throttle key, interval and
--       burst ('' for a key: no gate).
-- Answers {position, item, ...}: for each item not queued (an item of the same id or
-- dedupe key answered instead), its position in the call and that item; {} when every
-- item was queued.
-- A new item of width 2 or 3 (the common batch) is written at once and placed with its
-- run: one ready-set write, one depth count, one placement (`place` keeps a tenant's
-- oldest item, so placing the run's oldest places them all) and one doorbell read a run.
local now, ttl, token, order = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
if ttl == '' then ttl = nil end
local at_now = tonumber(now)
local items = base .. 'item:'
-- The items this call wrote or found its own token on: an id given again is a duplicate
-- of it (the shared token alone would read as a retry of this call).
local written = {}
local answers = {}
local at, n = 6, 0
while at <= #ARGV do
  local tenant, queue, priority = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local width, count = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  at = at + 5
  local of_tenant = items .. #tenant .. ':' .. tenant
  local ready, queued, due = {}, 0, 0
  local oldest_at, oldest = nil, nil
  for _ = 1, count do
    local id, payload, available = ARGV[at], ARGV[at + 1], nil
    if width > 2 and ARGV[at + 2] ~= '' then available = ARGV[at + 2] end
    local item = of_tenant .. #id .. ':' .. id
    local member = string.format('%016d', (order + n) % 1e16) .. id
    n = n + 1
    local answer = 1
    if written[item] then
      redis.call('HINCRBY', qkey('stats', queue), 'duplicates', 1)
      answer = read_item(item)
    elseif width < 11 and not redis.call('HGET', item, 'state') then
      if available then
        redis.call('HSET', item, 'payload', payload, 'tenant', tenant, 'id', id,
          'queue', queue, 'priority', priority, 'member', member, 'state', 'queued',
          'enqueued_at', now, 'enqueue', token, 'available_at', available)
      else
        redis.call('HSET', item, 'payload', payload, 'tenant', tenant, 'id', id,
          'queue', queue, 'priority', priority, 'member', member, 'state', 'queued',
          'enqueued_at', now, 'enqueue', token)
      end
      local due_at = available and tonumber(available) or at_now
      ready[#ready + 1] = available or now
      ready[#ready + 1] = member
      queued = queued + 1
      if due_at <= at_now then due = due + 1 end
      -- Members rise through the run: on equal availability the first is the oldest.
      if not oldest_at or due_at < oldest_at then oldest_at, oldest = due_at, member end
    else
      local dedupe, attempts, failures, gates = nil, nil, nil, nil
      if width == 11 then
        dedupe, attempts, failures = ARGV[at + 3], ARGV[at + 4], ARGV[at + 5]
        if dedupe == '' then dedupe = nil end
        if attempts == '' then attempts, failures = nil, nil end
        if ARGV[at + 6] ~= '' or ARGV[at + 8] ~= '' then
          gates = {ARGV[at + 6], ARGV[at + 7], ARGV[at + 8], ARGV[at + 9], ARGV[at + 10]}
        end
      end
      answer = enqueue_item(item, tenant, member, queue, payload, priority, now, token,
        available, dedupe, attempts, failures, ttl, gates)
    end
    if answer == 1 then
      written[item] = true
    else
      answers[#answers + 1] = n
      answers[#answers + 1] = answer
    end
    at = at + width
  end
  if oldest then
    -- At most 1,000 items a call (BATCH_MOST): 2,000 arguments, within what unpack takes.
    redis.call('ZADD', ready_key(queue, tenant, priority), unpack(ready))
    redis.call('HINCRBY', qkey('stats', queue), 'depth', queued)
    place(queue, tenant, oldest, oldest_at, at_now)
    if due > 0 then
      -- `ring` for each due item, in one push.
      local bell = qkey('bell', queue)
      local room = 64 - redis.call('LLEN', bell)
      if room > 0 then
        local rings = {}
        for i = 1, math.min(room, due) do rings[i] = now end
        redis.call('LPUSH', bell, unpack(rings))
      end
    end
  end
end
return answers
