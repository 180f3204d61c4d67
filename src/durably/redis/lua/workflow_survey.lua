-- The status, the records under the keys asked and those under the key prefixes asked,
-- read at once. KEYS: status, records. ARGV: the number n of status fields, those n
-- fields, the number m of record keys, those m keys, then the prefixes.
-- Answers {the status fields, {key, value, key, value, ...} of the records found}.
local n = tonumber(ARGV[1])
local m = tonumber(ARGV[n + 2])
local found, asked = {}, {}
if m > 0 then
  local values = redis.call('HMGET', KEYS[2], unpack(ARGV, n + 3, n + 2 + m))
  for i = 1, m do
    local key = ARGV[n + 2 + i]
    asked[key] = true
    if values[i] then
      found[#found + 1] = key
      found[#found + 1] = values[i]
    end
  end
end
if #ARGV > n + 2 + m then
  for _, key in ipairs(redis.call('HKEYS', KEYS[2])) do
    if not asked[key] then
      for i = n + 3 + m, #ARGV do
        if string.sub(key, 1, #ARGV[i]) == ARGV[i] then
          found[#found + 1] = key
          found[#found + 1] = redis.call('HGET', KEYS[2], key)
          break
        end
      end
    end
  end
end
return {redis.call('HMGET', KEYS[1], unpack(ARGV, 2, n + 1)), found}
