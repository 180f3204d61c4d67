-- Add to a run's counters server-side (HINCRBY, so concurrent patches all land) and bump
-- its version, and add the usage and cost to the tenant's totals.
-- KEYS: run blob, run meta, totals. ARGV: updated_at, then field/amount pairs.
-- Returns false for an absent run, {'overflow', field} (nothing added) when a counter would
-- pass a signed 64-bit integer, else {blob, meta}.
if redis.call('EXISTS', KEYS[2]) == 0 then return false end
for i = 2, #ARGV, 2 do
  local added = redis.pcall('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
  if type(added) == 'table' and added.err then
    -- A script is not rolled back: take back what this one added before answering.
    for j = 2, i - 2, 2 do
      -- Amounts are positive decimal text (the client sends no zero): negate as text, so
      -- no amount passes through a Lua number (a double) on the way back.
      if ARGV[j + 1] ~= '0' then redis.call('HINCRBY', KEYS[2], ARGV[j], '-' .. ARGV[j + 1]) end
    end
    return {'overflow', ARGV[i]}
  end
end
if redis.call('HEXISTS', KEYS[2], 'totalled') == 1 then  -- else counted whole later
  for i = 2, #ARGV, 2 do
    if totalled(ARGV[i]) then add_total(KEYS[3], ARGV[i], ARGV[i + 1]) end
  end
end
redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('HSET', KEYS[2], 'updated_at', ARGV[1])
return {redis.call('GET', KEYS[1]), redis.call('HGETALL', KEYS[2])}
