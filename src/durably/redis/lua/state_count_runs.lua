-- Add a batch of a tenant's runs stored before the totals existed to its totals (each once:
-- a run already in is passed over). KEYS: tenant run index, totals. ARGV: tenant prefix,
-- after sequence, batch size. Returns the last sequence examined, or false at the end.
local prefix = ARGV[1]
local batch = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf', 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[3]))
if #batch == 0 then return false end
for i = 1, #batch, 2 do
  local id = batch[i]
  count_run(KEYS[2], prefix .. 'meta:' .. #id .. ':' .. id, '')
end
return batch[#batch]
