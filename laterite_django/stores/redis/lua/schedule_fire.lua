-- ARGV: prefix, name, tick ('' for a push outside the ticks), mode ('push' or
-- 'advance'), skip_if_running ('1'/'0'), then the PUSH arguments of one job (now, 1,
-- its nine values). Returns {outcome, id}.
--!include _common.lua
local function push_one(b)
  local now = clock()
  local name, queue, payload = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
  local priority, pushed_at, avail = ARGV[b + 4], ARGV[b + 5], due_at(ARGV[b + 6], now)
  local retry_until, has_key, key = ARGV[b + 7], ARGV[b + 8], ARGV[b + 9]
  local id = new_id()
  if has_key == '1' and not take_key(key, id) then return 0 end
  local k = jkey(id)
  redis.call('HSET', k, 'name', name, 'queue', queue, 'payload', payload,
    'priority', priority, 'pushed_at', pushed_at, 'available_at', avail,
    'attempts', 0, 'last_error', '', 'claimed_by', '')
  if retry_until ~= '' then redis.call('HSET', k, 'retry_until', retry_until) end
  if has_key == '1' then redis.call('HSET', k, 'unique_key', key) end
  enqueue(k, queue, id, avail, now)
  redis.call('SADD', P .. ':queues', queue)
  wake(queue, 1)
  return tonumber(id)
end

local name, tick, mode, check = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now = ARGV[6]
local s = P .. ':schedule:' .. name
if tick ~= '' then
  if redis.call('HGET', s, 'paused') == '1' then return {'paused', 0} end
  local last = redis.call('HGET', s, 'last_tick')
  if last and last ~= '' and tonumber(last) >= tonumber(tick) then return {'lost', 0} end
  if mode == 'advance' then
    redis.call('HSET', s, 'last_tick', tick)
    return {'advanced', 0}
  end
  if check == '1' then
    local held = redis.call('HGET', s, 'job_id')
    if held and held ~= '' and redis.call('EXISTS', jkey(held)) == 1 then
      redis.call('HSET', s, 'last_tick', tick)
      return {'overlap', 0}
    end
  end
end
-- The push first: a script error in it (Redis keeps what a script wrote before an
-- error) leaves the cursor where it was, so the tick is fired again, not lost.
local id = push_one(7)
if tick ~= '' then
  redis.call('HSET', s, 'last_tick', tick, 'fired_at', tick, 'job_id', id)
else
  redis.call('HSETNX', s, 'last_tick', now)
  redis.call('HSET', s, 'fired_at', now, 'job_id', id)
  redis.call('SADD', P .. ':schedules', name)
end
return {'pushed', id}
