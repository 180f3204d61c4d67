-- Walking a dead-letter set (scored by enqueue order, then ordered by item ref) from a
-- cursor of {score, ref}: entries added or removed behind the cursor move nothing ahead of
-- it, so a walk sees every entry that stayed in the set, once.

-- Up to `count` {score, ref} of `key` after the cursor (`after` '' for the first), in
-- order. Refs tying with the cursor's score (two producers' items in one microsecond) are
-- read apart and kept when their ref sorts after the cursor's; a set orders equal scores
-- by ref alike.
local function following(key, count, after, after_ref)
  local found = {}
  local refs
  if after == '' then
    refs = redis.call('ZRANGE', key, 0, count - 1, 'WITHSCORES')
  else
    local ties = redis.call('ZRANGE', key, after, after, 'BYSCORE')
    for _, ref in ipairs(ties) do
      if ref > after_ref and #found < count then found[#found + 1] = {tonumber(after), ref} end
    end
    refs = redis.call('ZRANGE', key, '(' .. after, '+inf', 'BYSCORE', 'LIMIT', 0,
      count - #found, 'WITHSCORES')
  end
  for i = 1, #refs, 2 do found[#found + 1] = {tonumber(refs[i + 1]), refs[i]} end
  return found
end

-- The cursor's score as text that reads back as the same number.
local function cursor(entry) return string.format('%.17g', entry[1]) end
