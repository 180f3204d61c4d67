-- Shared by the scheduler scripts (prepended at load). KEYS[1] is always the key every
-- ready entry lived in before schedulers kept tenants (relaid out below); ARGV[1] the
-- scheduler's key prefix (which carries its hash tag), ARGV[2] the default tenant.
--   line:<tenant>  the tenant's queued workflows (ready, no hand-out in flight), scored by
--                  priority, then when they became visible: the entry's priority offset
--                  (a multiple of 2^51, 0 for NORMAL, below for higher) plus its
--                  visibility in us since EPOCH_US, exact in a double; ties by workflow id;
--   rota           served tenants with a queued workflow, scored by their turn;
--   fresh          never-served tenants with a queued workflow, scored by their head's
--                  visibility, member the head's workflow, NUL, the tenant (the tie-break
--                  a first turn takes); fresh-of maps the tenant to that member;
--   turns          every served tenant's last turn (kept while it has nothing queued);
--   in-flight      hand-outs by when their lease lapses (us); receipts, taken beside them;
--   sleeping       sleeping entries by due time (the caller's clock);
--   tenant-of      every entry's tenant;
--   priority-of    the priority offset of every entry not at NORMAL.
-- A tenant with a queued workflow is in exactly one of rota and fresh (the fairness order
-- in durably.stores.workflows: fresh first by head, then rota by turn).
local prefix, default_tenant = ARGV[1], ARGV[2]
local legacy = KEYS[1]
local sleeping, in_flight = prefix .. 'sleeping', prefix .. 'in-flight'
local receipts, taken = prefix .. 'receipts', prefix .. 'taken'
local rota, fresh, fresh_of = prefix .. 'rota', prefix .. 'fresh', prefix .. 'fresh-of'
local turns, tenant_of = prefix .. 'turns', prefix .. 'tenant-of'
local priority_of = prefix .. 'priority-of'
local RANK_US, EPOCH_US = 2251799813685248, 1700000000000000  -- 2^51 us; Nov 2023
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end
local function line(tenant) return prefix .. 'line:' .. #tenant .. ':' .. tenant end
-- A line's score for ``workflow`` visible since ``at`` (us), and back to ``at``.
local function rank(workflow, at)
  return fmt(tonumber(redis.call('HGET', priority_of, workflow) or '0') + at - EPOCH_US)
end
local function seen_at(score) return fmt(tonumber(score) % RANK_US + EPOCH_US) end
local function owner(workflow) return redis.call('HGET', tenant_of, workflow) or default_tenant end
local function ring()
  -- The doorbell an idle next_ready blocks on; bounded so nobody has to drain it.
  redis.call('LPUSH', prefix .. 'bell', '1')
  redis.call('LTRIM', prefix .. 'bell', 0, 63)
end

-- A never-served tenant's place among the fresh: its line's head (the lower-ranked of
-- ``member`` and the one it has, compared by the sorted set itself, byte by byte).
local function head_fresh(tenant, at, member)
  local had = redis.call('HGET', fresh_of, tenant)
  if had == member then
    redis.call('ZADD', fresh, at, member)
    return
  end
  redis.call('ZADD', fresh, at, member)
  if had and redis.call('ZRANK', fresh, had) < redis.call('ZRANK', fresh, member) then
    redis.call('ZREM', fresh, member)
    return
  end
  if had then redis.call('ZREM', fresh, had) end
  redis.call('HSET', fresh_of, tenant, member)
end

-- ``workflow`` joins ``tenant``'s line, visible since ``at`` (us): the tenant joins the
-- rotation (by its turn if it was ever served, else among the fresh by its head).
local function place(tenant, workflow, at)
  redis.call('HSET', tenant_of, workflow, tenant)
  redis.call('ZADD', line(tenant), rank(workflow, at), workflow)
  if redis.call('ZSCORE', rota, tenant) then return end
  local turn = redis.call('HGET', turns, tenant)
  if turn then
    redis.call('ZADD', rota, turn, tenant)
  else
    head_fresh(tenant, fmt(at), workflow .. '\0' .. tenant)
  end
end

-- ``tenant``'s line changed other than by a hand-out: out of the rotation if it is empty,
-- else a fresh tenant's head as its line now stands.
local function settle(tenant)
  local first = redis.call('ZRANGE', line(tenant), 0, 0, 'WITHSCORES')
  local had = redis.call('HGET', fresh_of, tenant)
  if not first[1] then
    redis.call('ZREM', rota, tenant)
    if had then
      redis.call('ZREM', fresh, had)
      redis.call('HDEL', fresh_of, tenant)
    end
  elseif had then
    redis.call('ZREM', fresh, had)
    local member = first[1] .. '\0' .. tenant
    redis.call('ZADD', fresh, seen_at(first[2]), member)
    redis.call('HSET', fresh_of, tenant, member)
  end
end

-- Take ``workflow`` out of its tenant's line, if it is there.
local function unqueue(workflow, tenant)
  if redis.call('ZREM', line(tenant), workflow) == 1 then settle(tenant) end
end

-- Entries written before schedulers kept tenants lived in one set by visibility: each joins
-- the default tenant (its hand-out, if one is in flight, waits for its lease as before).
-- Run by every script, so entries an earlier release writes meanwhile move over too.
local function relayout()
  if redis.call('EXISTS', legacy) == 0 then return end
  local old = redis.call('ZRANGE', legacy, 0, -1, 'WITHSCORES')
  for i = 1, #old, 2 do
    local workflow, at = old[i], tonumber(old[i + 1])
    local tenant = owner(workflow)
    if redis.call('HEXISTS', receipts, workflow) == 1 then
      redis.call('ZADD', in_flight, fmt(at), workflow)
      redis.call('HSET', tenant_of, workflow, tenant)
    else
      place(tenant, workflow, at)
    end
  end
  redis.call('DEL', legacy)
end
relayout()

-- Queued now in ``tenant``'s line, no hand-out outstanding.
local function queue(workflow, tenant, at)
  redis.call('ZREM', sleeping, workflow)
  redis.call('ZREM', in_flight, workflow)
  redis.call('HDEL', receipts, workflow)
  redis.call('HDEL', taken, workflow)
  place(tenant, workflow, at)
end
