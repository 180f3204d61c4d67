-- Hand-outs taken at least ``idle`` ago rejoin their tenants' lines, visible now.
-- KEYS: legacy ready set. ARGV: prefix, default tenant, idle (us)
local now = now_us()
local idle = tonumber(ARGV[3])
local held = redis.call('HGETALL', taken)
local reclaimed = {}
for i = 1, #held, 2 do
  if now - tonumber(held[i + 1]) >= idle then
    queue(held[i], owner(held[i]), now)
    reclaimed[#reclaimed + 1] = held[i]
  end
end
if reclaimed[1] then ring() end
return reclaimed
