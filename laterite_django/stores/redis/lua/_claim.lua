--!include _common.lua
local within, token, worker, limit = tonumber(ARGV[2]), ARGV[3], ARGV[4], tonumber(ARGV[5])
local again = ARGV[6] == '1'
local out = {}
local t = redis.call('TIME')
local at = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = string.format('%.0f', at)
local first, last = at - within, '+inf'  -- when the claim's first run may have dated its jobs

-- The rows of the jobs of `queues` an earlier run of this claim took (sent again: its
-- answer was lost), in the order it gave them; none if it never ran. They still
-- hold `token` and sit in their queue's claimed set at the time it dated them (no
-- heartbeat moved them: no worker knew them).
local function taken_before(queues)
  local rows = {}
  for _, q in ipairs(queues) do
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', qkey(q, 'claimed'), first, last)) do
      local f = redis.call('HMGET', jkey(id), 'token', 'attempts', 'name', 'queue',
        'payload', 'pushed_at', 'retry_until', 'unique_key', 'priority', 'last_error',
        'available_at', 'position', 'uncounted', 'cancel_requested')
      if f[1] == token then
        rows[#rows + 1] = {tonumber(id), tonumber(f[2]), f[3], f[4], f[5], f[6], f[7],
          f[8], f[9], f[10], f[11], tonumber(f[12]), f[13], f[14]}
      end
    end
  end
  table.sort(rows, function(a, b) return a[12] < b[12] end)
  return rows
end

-- Move the due jobs of queue `q` from its delayed set to its ready set.
local function make_ready(q)
  local ready = qkey(q, 'ready')
  local due = redis.call('ZRANGEBYSCORE', qkey(q, 'delayed'), '-inf', now, 'LIMIT', 0, 1000)
  for _, id in ipairs(due) do
    local k = jkey(id)
    local f = redis.call('HMGET', k, 'priority', 'member')
    if f[2] then redis.call('ZADD', ready, -tonumber(f[1] or '0'), f[2]) end
    redis.call('ZREM', qkey(q, 'delayed'), id)
  end
end

-- Claim job `id` (hash `k`) of queue `q`, taken off its ready set: the next row of `out`.
local function take(q, k, id)
  local position = #out
  redis.call('HSET', k, 'token', token, 'claimed_at', now, 'claimed_by', worker,
    'position', position)
  redis.call('HDEL', k, 'failing')
  local attempts = redis.call('HINCRBY', k, 'attempts', 1)
  redis.call('ZADD', qkey(q, 'claimed'), now, id)
  drop_key(k, id)
  local f = redis.call('HMGET', k, 'name', 'queue', 'payload', 'pushed_at',
    'retry_until', 'unique_key', 'priority', 'last_error', 'available_at', 'uncounted',
    'cancel_requested', 'fk')
  count_fair(q, f[12], -1)
  out[#out + 1] = {tonumber(id), attempts, f[1], f[2], f[3], f[4], f[5], f[6], f[7],
    f[8], f[9], position, f[10], f[11]}
end

-- The claim's answer, the same for every claim script: sent again, the jobs its first
-- run took, if any; else, queue by queue of `queues` in order until `limit` jobs are
-- claimed, those `take_from(q, i)` claims from the i-th, its delayed jobs made ready
-- first. A paused queue (flow control: queue_pause) is left out of every claim.
local function claim(queues, take_from)
  if again then
    local rows = taken_before(queues)
    if #rows > 0 then return rows end
  end
  for i, q in ipairs(queues) do
    if #out >= limit then break end
    if redis.call('SISMEMBER', P .. ':paused', q) == 0 then
      make_ready(q)
      take_from(q, i)
    end
  end
  if #out > 0 then wake_idle() end
  return out
end
