-- One page of dead letters in enqueue order (the sets' score, then the item ref) after a
-- cursor: one tenant's, or every tenant's; optionally of one queue. The caller asks for
-- page after page from the cursor each returns, so no call's work grows with the number
-- of dead letters: one tenant's page looks at no more than `look` refs of its set (which
-- mixes queues), every tenant's reads at most `limit` + 1 refs of each queue's set.
-- KEYS: the tenant's dead-letter set, or (every tenant) the set of queue names.
-- ARGV: prefix, limit (items wanted), queue or '', 'tenant' or 'all', the cursor's score
-- ('' to start from the first) and ref, look.
-- Returns {score, ref, item...}: the cursor to ask from next, or '' when no dead letter
-- is left after this page.
local limit, queue = tonumber(ARGV[2]), ARGV[3]
local after, after_ref = ARGV[5], ARGV[6]

local out = {'', ''}
if ARGV[4] == 'all' then
  local queues = queue ~= '' and {queue} or redis.call('SMEMBERS', KEYS[1])
  local found = {}
  for _, q in ipairs(queues) do
    for _, entry in ipairs(following(qkey('dead', q), limit + 1, after, after_ref)) do
      found[#found + 1] = entry
    end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  for i = 1, math.min(limit, #found) do out[#out + 1] = read_item(item_key(found[i][2])) end
  if #found > limit then  -- more after this page
    out[1], out[2] = cursor(found[limit]), found[limit][2]
  end
  return out
end
local look = tonumber(ARGV[7])
local refs = following(KEYS[1], look, after, after_ref)
for i, entry in ipairs(refs) do
  local f = read_item(item_key(entry[2]))
  if queue == '' or f[QUEUE] == queue then
    out[#out + 1] = f
    if #out - 2 == limit then  -- the page is full: the next one starts after this ref
      if i < #refs or #refs == look then out[1], out[2] = cursor(entry), entry[2] end
      return out
    end
  end
end
if #refs == look then  -- the set may hold more after the last ref looked at
  out[1], out[2] = cursor(refs[look]), refs[look][2]
end
return out
