-- Run a LuaEffect and record its value in one script. The effect's source replaces the
-- marker line below. KEYS: claim, token, records, written, seq, status, then the effect's
-- keys. ARGV: token, key, ttl (ms), then the effect's args.
local function effect(KEYS, ARGV, defer)
--@effect
end

local token, key = ARGV[1], ARGV[2]
local existing = redis.call('HGET', KEYS[3], key)
if existing then return {'recorded', existing} end
if current_token(KEYS[2]) ~= tonumber(token) then return {'fenced'} end
local effect_keys, effect_args = {}, {}
for i = 7, #KEYS do effect_keys[#effect_keys + 1] = KEYS[i] end
for i = 4, #ARGV do effect_args[#effect_args + 1] = ARGV[i] end
-- Writes wait until the effect returned: Redis has no rollback, so an effect that raises
-- must not have written anything yet.
local writes = {}
local function defer(...) writes[#writes + 1] = {...} end
local ok, value = pcall(effect, effect_keys, effect_args, defer)
if not ok then
  if type(value) == 'table' and value.err then value = value.err end
  return {'failed', tostring(value)}
end
if type(value) ~= 'string' then
  return {'failed', 'a LuaEffect must return its value as codec text (a string)'}
end
for _, write in ipairs(writes) do redis.call(unpack(write)) end
local now = now_us()
local result = insert(KEYS[3], KEYS[4], KEYS[5], key, value, now)
touch(KEYS[1], token, now)
rearm(ARGV[3], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return {'ok', result[1], result[2]}
