-- Shared by the checkpointer scripts (prepended at load). Times are the server's TIME in
-- integer microseconds; %.0f keeps such numbers exact where tostring would round them.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end
-- nil while no claim has been handed out: then no pass is current, whatever its token.
local function current_token(token_key) return tonumber(redis.call('GET', token_key) or '') end

-- The next fencing token: a hybrid logical clock, so a token key lost to expiry or
-- deletion still yields a token above every pass handed out before.
local function next_token(token_key, now)
  local token = math.max(math.floor(now / 1000), (current_token(token_key) or 0) + 1)
  redis.call('SET', token_key, fmt(token))
  return token
end

-- Announce a change of the workflow that key ``k`` belongs to (any of its keys): PUBLISH
-- on the key prefix's changes channel ('<prefix>:wf:changes') ``what`` ('e' a report that
-- ended it, or a discard; 'r' a record or message) followed by the workflow's hash tag and what follows
-- it, from which the subscriber reads the id (a length-prefixed segment).
local function announce(k, what)
  local b = string.find(k, '{', 1, true)
  redis.call('PUBLISH', string.sub(k, 1, b - 1) .. 'changes', what .. string.sub(k, b))
end

local function rearm(ttl_ms, ...)
  if tonumber(ttl_ms) > 0 then
    for _, key in ipairs({...}) do redis.call('PEXPIRE', key, ttl_ms) end
  end
end

-- First writer wins: insert ``key`` at the next position, or report the stored value.
local function insert(records, written, seq, key, encoded, now)
  if redis.call('HSETNX', records, key, encoded) == 1 then
    local position = redis.call('INCR', seq)
    redis.call('HSET', written, key, fmt(position) .. ':' .. fmt(now))
    return {encoded, 1}
  end
  return {redis.call('HGET', records, key), 0}
end

-- A successful write is a sign of life: renew the holder's window, never past its budget.
local function touch(claim, token, now)
  local c = redis.call('HMGET', claim, 'token', 'held_until', 'alive_for')
  if c[1] and tonumber(c[1]) == tonumber(token) then
    local alive = math.min(now + tonumber(c[3]), tonumber(c[2]))
    redis.call('HSET', claim, 'alive_until', fmt(alive))
  end
end

-- The claim hash expires when its budget is spent; the token key outlives it.
local function hold(claim, token, held, alive, alive_for, now)
  redis.call('HSET', claim, 'token', fmt(token), 'held_until', fmt(held),
    'alive_until', fmt(alive), 'alive_for', alive_for)
  redis.call('PEXPIRE', claim, math.floor((held - now) / 1000) + 1)
end

-- Admission (durably.stores.admission): an admitted workflow's hash holds its tenant and
-- whether it counts as running; its tenant's counts live in the tenant's own slot, so the
-- caller moves them in a second step with what these answer: {tenant, delta, gate, move}
-- (the tenant whenever the workflow was admitted: the same step moves its run record).
-- A gated workflow's hash names its gate (durably.stores.gates), whose slot the caller
-- moves in a step of its own too; `moves` numbers the workflow's crossings, so the gate
-- takes each once and never an older one after a newer (gate_move.lua).
local function flip_admitted(admitted, running)
  local a = redis.call('HMGET', admitted, 'tenant', 'running', 'gate')
  if not a[1] then return {'', 0, '', 0} end
  if a[2] == running then return {a[1], 0, '', 0} end
  redis.call('HSET', admitted, 'running', running)
  local move = a[3] and redis.call('HINCRBY', admitted, 'moves', 1) or 0
  if running == '1' then return {a[1], 1, a[3] or '', move} end
  return {a[1], -1, a[3] or '', move}
end

-- A deleted workflow is no longer counted: {tenant, running (0 or 1), gate, move}, or
-- {'', 0, '', 0}.
local function unadmit(admitted)
  local a = redis.call('HMGET', admitted, 'tenant', 'running', 'gate', 'moves')
  if not a[1] then return {'', 0, '', 0} end
  redis.call('DEL', admitted)
  return {a[1], tonumber(a[2]), a[3] or '', tonumber(a[4] or '0') + 1}
end
