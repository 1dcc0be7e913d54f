"""The Redis store's Lua scripts that settle a claim: kept alive (HEARTBEAT), deleted
(DELETE, or FINISH for a job of a chain or batch), given back (RELEASE), marked on its
way to the failed list (MARK_FAILING), or requeued once abandoned (REQUEUE_ABANDONED).
Each acts only while the claim's token is current; the shared helpers are in redis_scripts."""

from __future__ import annotations

from .keys import _COMMON
from .lua_push_claim import _PUSH_JOBS

__all__ = ["DELETE", "FINISH", "HEARTBEAT", "MARK_FAILING", "RELEASE", "REQUEUE_ABANDONED"]

# ARGV: prefix, retry_after (microseconds), reason. The claims not refreshed for
# retry_after by the server's clock (TIME: the clock that dated them, never a worker's,
# see CLAIM_HEAD) are abandoned. Each abandoned claim goes back to its queue
# keeping its available_at (first in line); one at position 0 of its batch is
# charged a try, a later one (that may never have started) is not. Returns
# {requeued, marked}: `marked` lists the abandoned claims that were being moved to
# the failed list (id, token, name, queue, pushed_at), left in place for the
# caller to settle against the database.
REQUEUE_ABANDONED = _COMMON + """
local t = redis.call('TIME')
local at = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = string.format('%.0f', at)
local older, reason = string.format('%.0f', at - tonumber(ARGV[2])), ARGV[3]
local count = 0
local marked = {}
for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  local claimed = qkey(q, 'claimed')
  local woken = 0
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', claimed, '-inf', '(' .. older)) do
    local k = jkey(id)
    if redis.call('EXISTS', k) == 0 then
      redis.call('ZREM', claimed, id)
    elseif redis.call('HEXISTS', k, 'failing') == 1 then
      local f = redis.call('HMGET', k, 'token', 'name', 'pushed_at')
      marked[#marked + 1] = {tonumber(id), f[1], f[2], q, f[3]}
    else
      local f = redis.call('HMGET', k, 'available_at', 'position')
      unclaim(k, q, id, f[1] or now, now, reason,
        tonumber(f[2] or '0') > 0 and 'started' or '')
      count = count + 1
      woken = woken + 1
    end
  end
  if woken > 0 then wake(q, woken) end
end
return {count, marked}
"""

# ARGV: prefix, then id, token pairs. Returns how many claims were still held, each
# refreshed by the server's clock (TIME, as CLAIM_HEAD dates them).
HEARTBEAT = _COMMON + """
local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local count = 0
for i = 2, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local k = jkey(id)
  if redis.call('HGET', k, 'token') == token then
    redis.call('HSET', k, 'claimed_at', now)
    redis.call('ZADD', qkey(redis.call('HGET', k, 'queue'), 'claimed'), 'XX', now, id)
    count = count + 1
  end
end
return count
"""

# ARGV: prefix, then id, token pairs. Deletes the jobs whose claims are still held.
# Returns one code per pair: 1 deleted, 0 the job is gone, -1 it is under another
# claim or waiting again (the claim was lost). Safe to repeat.
DELETE = _COMMON + """
local out = {}
for i = 2, #ARGV, 2 do out[#out + 1] = delete_held(ARGV[i], ARGV[i + 1]) end
return out
"""

# ARGV: prefix, now, the caller's list of ends, then one JSON array: per finished
# job of a workflow, its id, token, record and the jobs to push after it (an array
# packed as for PUSH). Deletes each job whose claim is still held and, in the same
# step, pushes the next link of its chain and appends the `record`s (its batch end,
# '' for none) of those deleted to that list of ends the database has yet to count
# (stores/redis_ends), as one item.
# Returns one code per job: 1 deleted, 0 the job is gone, -1 the claim was lost.
FINISH = _COMMON + _PUSH_JOBS + """
local ended = ARGV[3]
local out = {}
local records = {}
for _, e in ipairs(cjson.decode(ARGV[4])) do
  local id, token, record, jobs = e[1], e[2], e[3], e[4]
  local code = delete_held(id, token)
  if code == 1 then
    if record ~= '' then records[#records + 1] = record end
    if #jobs > 0 then push_jobs(jobs) end
  end
  out[#out + 1] = code
end
if #records > 0 then
  -- One item for the ends of this call, separated by spaces: the counting process
  -- reads and parses one string per call, not one per job.
  redis.call('RPUSH', ended, table.concat(records, ' '))
  redis.call('SADD', P .. ':ended-lists', ended)
end
return out
"""

# ARGV: prefix, now (not read), id, token, available_at (a moment, or '+<us>' from the
# server's now: see redis_scripts), error, how ('started', 'unstarted' or '': see
# unclaim). Returns 1 if the claim was still held (the job is back in its queue), else 0.
# Due or not is the server's clock's (TIME), the one a claim reads.
RELEASE = _COMMON + """
local id, token, err, how = ARGV[3], ARGV[4], ARGV[6], ARGV[7]
local k = jkey(id)
if redis.call('HGET', k, 'token') ~= token then return 0 end
local now = clock()
local avail = due_at(ARGV[5], now)
local q = redis.call('HGET', k, 'queue')
unclaim(k, q, id, avail, now, err, how)
wake(q, 1)
return 1
"""

# ARGV: prefix, id, token. Marks a held claim as being moved to the failed list.
MARK_FAILING = _COMMON + """
local k = jkey(ARGV[2])
if redis.call('HGET', k, 'token') ~= ARGV[3] then return 0 end
redis.call('HSET', k, 'failing', '1')
return 1
"""
