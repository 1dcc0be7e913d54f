"""The Lua scripts of the Redis store: each multi-key operation runs atomically on the server.

Every script takes the key prefix as ARGV[1] and builds its keys from it, so
one script serves any queue; the store therefore needs a single Redis server
(not a cluster). The layout under the prefix `P`:

    P:id                   counter for job ids (INCR)
    P:job:<id>             hash: one job (name, queue, payload, priority, pushed_at,
                           available_at, attempts, retry_until, unique_key, last_error,
                           member; while claimed: token, claimed_at, claimed_by and
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

Times are integer microseconds since the epoch, passed in by the caller.
"""

from __future__ import annotations

__all__ = [
    "CLAIM",
    "CLEAR",
    "DELETE",
    "FINISH",
    "HEARTBEAT",
    "MAKE_DUE",
    "MARK_FAILING",
    "PUSH",
    "RELEASE",
    "REQUEUE_ABANDONED",
    "WAKE_CAP",
]

# At most this many wake-up tokens wait per queue: enough to wake every idle worker
# at once, few enough that stale tokens cost idle workers only a few empty claims.
WAKE_CAP = 32
# Seconds a quiet worker's wake-up token is kept: one that nobody pops (its worker is
# gone) goes by itself.
QUIET_TOKEN_TTL = 600
# Seconds a push's "once" mark is kept (the outbox's moves: see redis_outbox).
ONCE_TTL = 7 * 24 * 3600

_COMMON = """
local P = ARGV[1]
local function jkey(id) return P .. ':job:' .. id end
local function qkey(q, kind) return P .. ':queue:' .. q .. ':' .. kind end
local function pad(s, width) return string.rep('0', width - #s) .. s end
local function member(avail, id) return pad(avail, 17) .. ':' .. pad(id, 19) end
local function member_id(m) return string.match(m, ':0*(%d+)$') end

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
local function unclaim(k, q, id, avail, now, err, undo)
  redis.call('HDEL', k, 'token', 'claimed_at', 'failing')
  redis.call('HSET', k, 'claimed_by', '', 'last_error', err, 'available_at', avail,
    'position', 0)
  if undo then redis.call('HINCRBY', k, 'attempts', -1) end
  redis.call('ZREM', qkey(q, 'claimed'), id)
  local key = redis.call('HGET', k, 'unique_key')
  if key and not take_key(key, id) then redis.call('HDEL', k, 'unique_key') end
  enqueue(k, q, id, avail, now)
end
"""

# ARGV: prefix, now, then one JSON array of strings (redis_values.push_packed): per
# job name, queue, payload, priority, pushed_at, available_at, retry_until ('' for
# none), has_key ('1'/'0'), unique_key. One argument rather than nine per job: each
# argument costs the client more to send than the script to decode.
# Optional ARGV[4]: one JSON array of marks, one per job (see push_jobs).
# Returns each job's id, 0 where it was dropped as a duplicate of a waiting job.
_PUSH_JOBS = """
-- Store the jobs of packed array A (see PUSH); return their ids (0: a duplicate).
-- `once` (or nil): per job a mark ('' for none); a job whose mark was set by an
-- earlier push (within ONCE_TTL s) is not pushed again (its id: 0).
local function push_jobs(now, A, once)
local n = #A / 9
local ids = {}
local pushed = {}
for i = 0, n - 1 do
  local b = i * 9
  local name, queue, payload = A[b + 1], A[b + 2], A[b + 3]
  local priority, pushed_at, avail = A[b + 4], A[b + 5], A[b + 6]
  local retry_until, has_key, key = A[b + 7], A[b + 8], A[b + 9]
  local id = '0'
  if once and once[i + 1] ~= '' and not redis.call(
      'SET', P .. ':once:' .. once[i + 1], '1', 'NX', 'EX', """ + str(ONCE_TTL) + """) then
    ids[i + 1] = 0
  else
    id = tostring(redis.call('INCR', P .. ':id'))
  end
  if id == '0' then
    -- pushed before: nothing to do
  elseif has_key == '1' and not take_key(key, id) then
    ids[i + 1] = 0
  else
    local k = jkey(id)
    local m = member(avail, id)
    -- One HSET with every field (enqueue() would read the priority back and
    -- write the member separately).
    local fields = {'name', name, 'queue', queue, 'payload', payload, 'priority', priority,
      'pushed_at', pushed_at, 'available_at', avail, 'attempts', 0, 'last_error', '',
      'claimed_by', '', 'member', m}
    if retry_until ~= '' then
      fields[#fields + 1] = 'retry_until'
      fields[#fields + 1] = retry_until
    end
    if has_key == '1' then
      fields[#fields + 1] = 'unique_key'
      fields[#fields + 1] = key
    end
    redis.call('HSET', k, unpack(fields))
    if tonumber(avail) <= now then
      redis.call('ZADD', qkey(queue, 'ready'), -tonumber(priority), m)
    else
      redis.call('ZADD', qkey(queue, 'delayed'), avail, id)
    end
    pushed[queue] = (pushed[queue] or 0) + 1
    ids[i + 1] = tonumber(id)
  end
end
for q, count in pairs(pushed) do
  redis.call('SADD', P .. ':queues', q)
  wake(q, count)
end
return ids
end
"""
PUSH = _COMMON + _PUSH_JOBS + """
return push_jobs(tonumber(ARGV[2]), cjson.decode(ARGV[3]), ARGV[4] and cjson.decode(ARGV[4]))
"""

# The head of both claim scripts (CLAIM, and redis_limits.CLAIM_LIMITED): their
# first arguments (prefix, now, token, worker, limit), the rows they return (`out`)
# and the two steps they share. `now` may be "<sent>:<span>" instead: the claim
# rides behind a long blocking pop sent at `sent` (redis_wait), so it is dated by the
# server's clock, kept within [sent, sent + span] so that a clock that is off cannot
# date it outside the pop.
CLAIM_HEAD = _COMMON + """
local now, token, worker, limit = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local out = {}
local sent, span = string.match(now, '^(%d+):(%d+)$')
if sent then
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000000 + tonumber(t[2])
  sent = tonumber(sent)
  now = string.format('%.0f', math.min(math.max(at, sent), sent + tonumber(span)))
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
    'retry_until', 'unique_key', 'priority', 'last_error', 'available_at')
  out[#out + 1] = {tonumber(id), attempts, f[1], f[2], f[3], f[4], f[5], f[6], f[7],
    f[8], f[9], position}
end
"""

# ARGV: prefix, now, token, worker, limit, then the queue names in priority order.
# Moves due delayed jobs to ready first. Returns one array per claimed job, in the
# order the worker runs them: id, attempts, name, queue, payload, pushed_at,
# retry_until, unique_key, priority, last_error, available_at, position (0, 1...).
CLAIM = CLAIM_HEAD + """
for qi = 6, #ARGV do
  if #out >= limit then break end
  local q = ARGV[qi]
  -- A paused queue (flow control: queue_pause) is left out of every claim.
  if redis.call('SISMEMBER', P .. ':paused', q) == 0 then
  local ready = qkey(q, 'ready')
  make_ready(q)
  while #out < limit do
    local members = redis.call('ZRANGE', ready, 0, limit - #out - 1)
    if #members == 0 then break end
    for _, m in ipairs(members) do
      redis.call('ZREM', ready, m)
      local id = member_id(m)
      local k = jkey(id)
      if redis.call('EXISTS', k) == 1 then take(q, k, id) end
    end
  end
  end
end
if #out > 0 then wake_quiet() end
return out
"""

# ARGV: prefix, now, older_than, reason. Each abandoned claim goes back to its queue
# keeping its available_at (first in line); one at position 0 of its batch keeps
# its attempt, a later one (that may never have started) has it undone. Returns
# {requeued, marked}: `marked` lists the abandoned claims that were being moved to
# the failed list (id, token, name, queue, pushed_at), left in place for the
# caller to settle against the database.
REQUEUE_ABANDONED = _COMMON + """
local now, older, reason = ARGV[2], ARGV[3], ARGV[4]
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
      unclaim(k, q, id, f[1] or now, now, reason, tonumber(f[2] or '0') > 0)
      count = count + 1
      woken = woken + 1
    end
  end
  if woken > 0 then wake(q, woken) end
end
return {count, marked}
"""

# ARGV: prefix, now, then id, token pairs. Returns how many claims were still held.
HEARTBEAT = _COMMON + """
local now = ARGV[2]
local count = 0
for i = 3, #ARGV, 2 do
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
local now, ended = tonumber(ARGV[2]), ARGV[3]
local out = {}
local records = {}
for _, e in ipairs(cjson.decode(ARGV[4])) do
  local id, token, record, jobs = e[1], e[2], e[3], e[4]
  local code = delete_held(id, token)
  if code == 1 then
    if record ~= '' then records[#records + 1] = record end
    if #jobs > 0 then push_jobs(now, jobs) end
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

# ARGV: prefix, now, id, token, available_at, error, undo ('1'/'0'). Returns 1 if
# the claim was still held (the job is back in its queue), else 0.
RELEASE = _COMMON + """
local now, id, token, avail, err, undo = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local k = jkey(id)
if redis.call('HGET', k, 'token') ~= token then return 0 end
local q = redis.call('HGET', k, 'queue')
unclaim(k, q, id, avail, now, err, undo == '1')
wake(q, 1)
return 1
"""

# ARGV: prefix, now, then job ids. Makes the waiting or delayed ones due now (a job
# already due keeps its place) and wakes the workers. Returns how many there were.
MAKE_DUE = _COMMON + """
local now = ARGV[2]
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

# ARGV: prefix, id, token. Marks a held claim as being moved to the failed list.
MARK_FAILING = _COMMON + """
local k = jkey(ARGV[2])
if redis.call('HGET', k, 'token') ~= ARGV[3] then return 0 end
redis.call('HSET', k, 'failing', '1')
return 1
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
