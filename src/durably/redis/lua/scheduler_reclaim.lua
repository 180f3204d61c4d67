-- Hand-outs taken at least ``idle`` ago become visible again. KEYS: ready.
-- ARGV: prefix, idle (us)
local now = now_us()
local idle = tonumber(ARGV[2])
local held = redis.call('HGETALL', taken)
local reclaimed = {}
for i = 1, #held, 2 do
  if now - tonumber(held[i + 1]) >= idle then
    make_ready(held[i], now)
    reclaimed[#reclaimed + 1] = held[i]
  end
end
return reclaimed
