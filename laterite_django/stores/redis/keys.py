"""What every Lua script of the Redis store shares: the key layout under the prefix and
the helpers each script begins with (`_COMMON`). The scripts themselves are grouped by
what they serve: redis_scripts_push_claim, redis_scripts_settle, redis_scripts_manage.

Every script takes the key prefix as ARGV[1] and builds its keys from it, so
one script serves any queue; the store therefore needs a single Redis server
(not a cluster). The layout under the prefix `P`:

    P:id                   counter for job ids (INCR)
    P:job:<id>             hash: one job (name, queue, payload, priority, pushed_at,
                           available_at, attempts, uncounted, retry_until, unique_key,
                           last_error, member; while claimed: token, claimed_at, claimed_by and
                           position, its place in the claimed batch; while being moved
                           to the failed list: failing)
    P:queues               set of the queue names ever pushed to
    P:unique               hash: unique key -> id of the *waiting* job that holds it
    P:queue:<q>:ready      zset of due jobs: score -priority, member "<available_at>:<id>"
                           zero-padded, so equal scores sort oldest first, then by id
    P:queue:<q>:delayed    zset of jobs not yet due: score available_at, member id
    P:queue:<q>:claimed    zset of claimed jobs: score the last heartbeat, member id
    P:queue:<q>:wake       list that idle workers block on (BLPOP); a push adds to it
    P:paused               set of the paused queue names (flow control): CLAIM skips them
    P:quiet                set of the wake-up lists of quiet workers (redis_quiet): the
                           next claim of any job pushes to each and empties it
    P:worker:<name>:wake   list a quiet worker blocks on beside its queues' (redis_quiet)

Times are integer microseconds since the epoch. What is due is the server's clock's
(TIME, `clock()`), never a caller's: a caller sends a moment (push_at) as it is, and a
due time counted from now (a push, push_in, a retry's backoff) as '+<microseconds>',
which the script adds to the server's now (`due_at`).
"""

from __future__ import annotations

__all__ = ["QUIET_TOKEN_TTL", "WAKE_CAP"]

# At most this many wake-up tokens wait per queue: enough to wake every idle worker
# at once, few enough that stale tokens cost idle workers only a few empty claims.
WAKE_CAP = 32
# Seconds a quiet worker's wake-up token is kept: one that nobody pops (its worker is
# gone) goes by itself.
QUIET_TOKEN_TTL = 600

_COMMON = """
local P = ARGV[1]
local function jkey(id) return P .. ':job:' .. id end
local function qkey(q, kind) return P .. ':queue:' .. q .. ':' .. kind end
local function pad(s, width) return string.rep('0', width - #s) .. s end
local function member(avail, id) return pad(avail, 17) .. ':' .. pad(id, 19) end
local function member_id(m) return string.match(m, ':0*(%d+)$') end
-- The server's now (TIME), in microseconds, as a string.
local function clock()
  local t = redis.call('TIME')
  return string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
end
-- A due time as a caller sent it: '+<us>' counts from `now` (the server's clock), any
-- other is a moment already.
local function due_at(avail, now)
  if string.byte(avail, 1) ~= 43 then return avail end
  return string.format('%.0f', tonumber(now) + tonumber(string.sub(avail, 2)))
end
-- A new job's id. Never one whose job is still there: a counter set back (its key
-- lost to eviction, a partial restore) would otherwise overwrite that job.
local function new_id()
  local id
  repeat id = tostring(redis.call('INCR', P .. ':id')) until redis.call('EXISTS', jkey(id)) == 0
  return id
end

-- Wake up to `count` idle workers blocked on queue `q`.
local function wake(q, count)
  local key = qkey(q, 'wake')
  local tokens = {}
  for i = 1, math.min(count, """ + str(WAKE_CAP) + """) do tokens[i] = '1' end
  if redis.call('RPUSH', key, unpack(tokens)) > """ + str(WAKE_CAP) + """ then
    redis.call('LTRIM', key, -""" + str(WAKE_CAP) + """, -1)
  end
end

-- Wake every quiet worker (redis_quiet): a job is claimed, so a worker that dies now
-- would leave it behind, and the idle workers must sweep again until it is settled.
local function wake_quiet()
  if redis.call('EXISTS', P .. ':quiet') == 1 then
    for _, key in ipairs(redis.call('SMEMBERS', P .. ':quiet')) do
      redis.call('RPUSH', key, '1')
      redis.call('EXPIRE', key, """ + str(QUIET_TOKEN_TTL) + """)
    end
    redis.call('DEL', P .. ':quiet')
  end
end

-- A key holder is stale if its job is gone or claimed (a running job holds no key).
local function take_key(key, id)
  local holder = redis.call('HGET', P .. ':unique', key)
  if holder and holder ~= id then
    local hk = jkey(holder)
    if redis.call('EXISTS', hk) == 1 and redis.call('HEXISTS', hk, 'token') == 0 then
      return false
    end
  end
  redis.call('HSET', P .. ':unique', key, id)
  return true
end

local function drop_key(k, id)
  local key = redis.call('HGET', k, 'unique_key')
  if key and redis.call('HGET', P .. ':unique', key) == id then
    redis.call('HDEL', P .. ':unique', key)
  end
end

-- Delete finished job `id` if `token` still holds its claim. Returns 1 deleted, 0 the
-- job is gone, -1 it is under another claim or waiting again (the claim was lost).
local function delete_held(id, token)
  local k = jkey(id)
  if redis.call('HGET', k, 'token') == token then
    drop_key(k, id)
    redis.call('ZREM', qkey(redis.call('HGET', k, 'queue'), 'claimed'), id)
    redis.call('DEL', k)
    return 1
  elseif redis.call('EXISTS', k) == 0 then
    return 0
  end
  return -1
end

-- Put job `id` (hash `k`, available at `avail`) in its queue's ready or delayed set.
local function enqueue(k, q, id, avail, now)
  if tonumber(avail) <= tonumber(now) then
    local priority = tonumber(redis.call('HGET', k, 'priority') or '0')
    local m = member(avail, id)
    redis.call('HSET', k, 'member', m)
    redis.call('ZADD', qkey(q, 'ready'), -priority, m)
  else
    redis.call('HSET', k, 'member', member(avail, id))
    redis.call('ZADD', qkey(q, 'delayed'), avail, id)
  end
end

-- Return a claimed job to its queue, due at `avail`; it keeps its unique key
-- unless another waiting job took it meanwhile.
-- `how` (see Store.release): 'started', the claim is not charged a try (it counts in
-- attempts, and in uncounted); 'unstarted', its attempt is taken back; else charged.
local function unclaim(k, q, id, avail, now, err, how)
  redis.call('HDEL', k, 'token', 'claimed_at', 'failing')
  redis.call('HSET', k, 'claimed_by', '', 'last_error', err, 'available_at', avail,
    'position', 0)
  if how == 'started' then
    redis.call('HINCRBY', k, 'uncounted', 1)
  elseif how == 'unstarted' then
    redis.call('HINCRBY', k, 'attempts', -1)
  end
  redis.call('ZREM', qkey(q, 'claimed'), id)
  local key = redis.call('HGET', k, 'unique_key')
  if key and not take_key(key, id) then redis.call('HDEL', k, 'unique_key') end
  enqueue(k, q, id, avail, now)
end
"""
