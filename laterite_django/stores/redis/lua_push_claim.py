"""The Redis store's Lua scripts that bring a job in and hand it out: PUSH (and
PUSH_ONE, its lean form for the push most code makes), and CLAIM on the head it shares
with the limited claim (CLAIM_HEAD). Each runs atomically on the
server; the key layout and the shared helpers are in redis_scripts."""

from __future__ import annotations

from .keys import _COMMON, WAKE_CAP

__all__ = ["CLAIM", "PUSH", "PUSH_ONE"]

# Seconds a push's "once" mark is kept (the outbox's moves: see redis_outbox).
ONCE_TTL = 7 * 24 * 3600

# Seconds a push's answer is kept for the same push sent again (redis_resend): a push
# is sent again at once, or within redis-py's retries (seconds), never later.
SENT_TTL = 120

# ARGV: prefix, now (the pusher's, not read: the server's TIME says what is due), then
# one JSON array of strings (redis_values.push_packed): per job name, queue, payload,
# priority, pushed_at, available_at (a moment, or '+<us>' from the server's now: see
# redis_scripts), retry_until ('' for none), has_key ('1'/'0'), unique_key. One
# argument rather than nine per job: each argument costs the client more to send than
# the script to decode.
# ARGV[4]: one JSON array of marks, one per job (see push_jobs), or ''.
# ARGV[5..7]: the sender, the push's number, '1' if it is sent again (redis_resend).
# Returns each job's id, 0 where it was dropped as a duplicate of a waiting job.
_PUSH_JOBS = """
-- Store the jobs of packed array A (see PUSH); return their ids (0: a duplicate).
-- `once` (or nil): per job a mark ('' for none); a job whose mark was set by an
-- earlier push (within ONCE_TTL s) is not pushed again (its id: 0). Due times are the
-- server's clock's (see redis_scripts).
local function push_jobs(A, once)
local now = clock()
local n = #A / 9
local ids = {}
local pushed = {}
for i = 0, n - 1 do
  local b = i * 9
  local name, queue, payload = A[b + 1], A[b + 2], A[b + 3]
  local priority, pushed_at, avail = A[b + 4], A[b + 5], due_at(A[b + 6], now)
  local retry_until, has_key, key = A[b + 7], A[b + 8], A[b + 9]
  local id = '0'
  if once and once[i + 1] ~= '' and not redis.call(
      'SET', P .. ':once:' .. once[i + 1], '1', 'NX', 'EX', """ + str(ONCE_TTL) + """) then
    ids[i + 1] = 0
  else
    id = new_id()
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
    if tonumber(avail) <= tonumber(now) then
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
local sent, number = P .. ':sent:' .. ARGV[5], ARGV[6]
if ARGV[7] == '1' then
  -- Sent again: if this push ran already, its ids, not a second copy of its jobs.
  local last = redis.call('GET', sent)
  if last and string.sub(last, 1, #number + 1) == number .. ':' then
    return cjson.decode(string.sub(last, #number + 2))
  end
end
local ids = push_jobs(cjson.decode(ARGV[3]), ARGV[4] ~= '' and cjson.decode(ARGV[4]) or nil)
redis.call('SET', sent, number .. ':' .. cjson.encode(ids), 'EX', """ + str(SENT_TTL) + """)
return ids
"""

# PUSH for one job without a unique key, in the fewest Lua steps: no helpers defined,
# no JSON, one HSET of literal fields. Every redis.call and helper costs the server
# microseconds, and on a lone push the server's time is most of what the pusher waits
# for beyond the round trip (bench/profile_push.py). It stores exactly what PUSH stores
# (tests/stores/test_redis_push_one.py compares the two).
# ARGV: prefix, now (not read), name, queue, payload, priority, pushed_at, available_at
# (as PUSH's), retry_until ('' for none), then as PUSH's ARGV[5..7]. Returns {id}.
PUSH_ONE = """
local P, queue, priority, avail = ARGV[1], ARGV[4], ARGV[6], ARGV[8]
local sent, number = P .. ':sent:' .. ARGV[10], ARGV[11]
if ARGV[12] == '1' then
  local last = redis.call('GET', sent)
  if last and string.sub(last, 1, #number + 1) == number .. ':' then
    return {tonumber(string.sub(last, #number + 2))}
  end
end
local id
repeat
  id = tostring(redis.call('INCR', P .. ':id'))
until redis.call('EXISTS', P .. ':job:' .. id) == 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if string.byte(avail, 1) == 43 then
  avail = string.format('%.0f', now + tonumber(string.sub(avail, 2)))
end
local m = string.rep('0', 17 - #avail) .. avail .. ':' .. string.rep('0', 19 - #id) .. id
local k = P .. ':job:' .. id
local q = P .. ':queue:' .. queue .. ':'
redis.call('HSET', k, 'name', ARGV[3], 'queue', queue, 'payload', ARGV[5],
  'priority', priority, 'pushed_at', ARGV[7], 'available_at', avail, 'attempts', 0,
  'last_error', '', 'claimed_by', '', 'member', m)
if ARGV[9] ~= '' then redis.call('HSET', k, 'retry_until', ARGV[9]) end
if tonumber(avail) <= now then
  redis.call('ZADD', q .. 'ready', -tonumber(priority), m)
else
  redis.call('ZADD', q .. 'delayed', avail, id)
end
redis.call('SADD', P .. ':queues', queue)
if redis.call('RPUSH', q .. 'wake', '1') > """ + str(WAKE_CAP) + """ then
  redis.call('LTRIM', q .. 'wake', -""" + str(WAKE_CAP) + """, -1)
end
redis.call('SET', sent, number .. ':' .. id, 'EX', """ + str(SENT_TTL) + """)
return {tonumber(id)}
"""

# The head of both claim scripts (CLAIM, and redis_limits.CLAIM_LIMITED): their
# first arguments (prefix, within, token, worker, limit, again), the rows they return
# (`out`) and the steps they share. The claim is dated by the server's clock (TIME),
# the one clock of every lease (claims, heartbeats, the sweep's cutoff) and of what is
# due: never a worker's, for hosts' clocks differ, and a sweeper whose clock ran ahead
# took live claims for abandoned. `again` is '1' when the claim is sent again, its
# answer lost (redis_calls.claim_again): it then answers with the jobs its first run
# took, dated at most `within` microseconds before this run.
CLAIM_HEAD = _COMMON + """
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
    'cancel_requested')
  out[#out + 1] = {tonumber(id), attempts, f[1], f[2], f[3], f[4], f[5], f[6], f[7],
    f[8], f[9], position, f[10], f[11]}
end
"""

# ARGV: prefix, now, token, worker, limit, again, then the queue names in priority
# order. Moves due delayed jobs to ready first. Returns one array per claimed job, in
# the order the worker runs them: id, attempts, name, queue, payload, pushed_at,
# retry_until, unique_key, priority, last_error, available_at, position (0, 1...),
# uncounted (false if never set), cancel_requested (false unless a cancel is pending).
CLAIM = CLAIM_HEAD + """
if again then
  local rows = taken_before({unpack(ARGV, 7)})
  if #rows > 0 then return rows end
end
for qi = 7, #ARGV do
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
