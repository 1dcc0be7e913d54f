"""The Redis store's Lua scripts for what an operator asks of jobs, from the admin or a
command: make waiting ones due now (MAKE_DUE), or delete a queue's jobs, waiting and
running (CLEAR). The shared helpers are in redis_scripts."""

from __future__ import annotations

from .keys import _COMMON

__all__ = ["CLEAR", "MAKE_DUE"]

# ARGV: prefix, now (not read), then job ids. Makes the waiting or delayed ones due at
# the server's now (TIME, the clock a claim reads; a job already due keeps its place)
# and wakes the workers. Returns how many there were.
MAKE_DUE = _COMMON + """
local now = clock()
local count = 0
local woken = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local k = jkey(id)
  if redis.call('EXISTS', k) == 1 and redis.call('HEXISTS', k, 'token') == 0 then
    local q = redis.call('HGET', k, 'queue')
    if redis.call('ZREM', qkey(q, 'delayed'), id) == 1 then
      local avail = redis.call('HGET', k, 'available_at')
      if tonumber(avail) > tonumber(now) then
        avail = now
        redis.call('HSET', k, 'available_at', now)
      end
      enqueue(k, q, id, avail, now)
      woken[q] = (woken[q] or 0) + 1
    end
    count = count + 1
  end
end
for q, n in pairs(woken) do wake(q, n) end
return count
"""

# ARGV: prefix, queue ('' for every queue), the caller's list of ends. Deletes every
# waiting and running job; those of a batch are listed there as failed ends.
CLEAR = _COMMON + """
local queues
if ARGV[2] == '' then queues = redis.call('SMEMBERS', P .. ':queues') else queues = {ARGV[2]} end
local count = 0
local ended = ARGV[3]
local function forget(id)
  local k = jkey(id)
  if redis.call('EXISTS', k) == 1 then
    -- A job of a batch is listed as a failed end, counted by the caller (redis_ends).
    local payload = redis.call('HGET', k, 'payload')
    local b, pos = nil, nil
    if payload then b, pos = string.match(payload, '"batch":%[(%d+),(%d+)%]}$') end
    if b then
      redis.call('RPUSH', ended, '[' .. b .. ',' .. pos .. ',1]')
      redis.call('SADD', P .. ':ended-lists', ended)
    end
    drop_key(k, id)
    redis.call('DEL', k)
    count = count + 1
  end
end
for _, q in ipairs(queues) do
  for _, m in ipairs(redis.call('ZRANGE', qkey(q, 'ready'), 0, -1)) do forget(member_id(m)) end
  for _, kind in ipairs({'delayed', 'claimed'}) do
    for _, id in ipairs(redis.call('ZRANGE', qkey(q, kind), 0, -1)) do forget(id) end
  end
  redis.call('DEL', qkey(q, 'ready'), qkey(q, 'delayed'), qkey(q, 'claimed'), qkey(q, 'wake'))
  redis.call('SREM', P .. ':queues', q)
end
return count
"""
