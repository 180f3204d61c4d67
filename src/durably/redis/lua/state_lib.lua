-- A run's part in its tenant's totals (durably.stores.totals): a count under its state, and
-- its usage and cost, kept in the tenant's totals hash (`runs:STATE`, `usage.FIELD`,
-- `cost_micros`). A run's meta holds `totalled` once its part is in (every write since the
-- totals existed; `state_count_runs` adds the runs stored before). HINCRBY takes decimal
-- text, so no amount passes through a Lua number (a double); a total that would pass a
-- signed 64-bit integer stays where it was.
local function totalled(field)
  return field == 'cost_micros' or string.sub(field, 1, 6) == 'usage.'
end

local function add_total(totals, field, amount)
  if amount and amount ~= '0' and amount ~= '-0' then
    redis.pcall('HINCRBY', totals, field, amount)
  end
end

-- Add the run whose meta hash is `meta` to `totals` (sign '') or take it out (sign '-'),
-- as the meta stands: taken out only if it is in, added (and marked in) only if it is not.
local function count_run(totals, meta, sign)
  local flat = redis.call('HGETALL', meta)
  if #flat == 0 then return end
  local counted = false
  for i = 1, #flat, 2 do
    if flat[i] == 'totalled' then counted = true end
  end
  if counted == (sign == '') then return end
  for i = 1, #flat, 2 do
    local field = flat[i]
    if field == 'state' then
      add_total(totals, 'runs:' .. flat[i + 1], sign .. '1')
    elseif totalled(field) and flat[i + 1] ~= '0' then
      add_total(totals, field, sign .. flat[i + 1])
    end
  end
  if sign == '' then
    redis.call('HSET', meta, 'totalled', '1')
  else
    redis.call('HDEL', meta, 'totalled')
  end
end

-- The runs of a tenant following a workflow (durably.stores.runs.FOLLOWS) are found by the
-- hash `<tenant prefix>following`: the workflow's engine key to the run id, written and
-- taken out by the run's own writes, so a run never follows without it.
local function follow(prefix, meta, run_id)
  local workflow = redis.call('HGET', meta, 'follows')
  if workflow and workflow ~= '' then
    redis.call('HSET', prefix .. 'following', workflow, run_id)
  end
end

local function unfollow(prefix, meta, run_id)
  local workflow = redis.call('HGET', meta, 'follows')
  if workflow and workflow ~= ''
    and redis.call('HGET', prefix .. 'following', workflow) == run_id then
    redis.call('HDEL', prefix .. 'following', workflow)
  end
end
