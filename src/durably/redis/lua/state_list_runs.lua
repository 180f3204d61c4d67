-- One scan step of a tenant's runs in creation order, filtered by state and updated_at.
-- KEYS: tenant run index. ARGV: tenant prefix, after sequence, state or '', updated_before
-- or '', matches wanted, entries to examine at most.
-- Returns {exhausted (0/1), last sequence examined, id, blob, meta, id, blob, meta, ...}.
local prefix, want, budget = ARGV[1], tonumber(ARGV[5]), tonumber(ARGV[6])
local state = ARGV[3]
local before = ARGV[4] ~= '' and tonumber(ARGV[4]) or nil
local out = {0, ARGV[2]}
local found = 0
local start = '(' .. ARGV[2]
while true do
  local batch = redis.call('ZRANGEBYSCORE', KEYS[1], start, '+inf', 'WITHSCORES', 'LIMIT', 0, 100)
  if #batch == 0 then
    out[1] = 1
    return out
  end
  for i = 1, #batch, 2 do
    local id = batch[i]
    out[2] = batch[i + 1]
    local seg = #id .. ':' .. id
    local meta = prefix .. 'meta:' .. seg
    local fields = redis.call('HMGET', meta, 'state', 'updated_at')
    local ok = fields[1] ~= false
    if ok and state ~= '' and fields[1] ~= state then ok = false end
    if ok and before and not (tonumber(fields[2]) < before) then ok = false end
    if ok then
      out[#out + 1] = id
      out[#out + 1] = redis.call('GET', prefix .. 'run:' .. seg)
      out[#out + 1] = redis.call('HGETALL', meta)
      found = found + 1
      if found >= want then return out end
    end
    budget = budget - 1
    if budget <= 0 then return out end
  end
  start = '(' .. out[2]
end
