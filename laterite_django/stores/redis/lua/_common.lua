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
  for i = 1, math.min(count, ${WAKE_CAP}) do tokens[i] = '1' end
  if redis.call('RPUSH', key, unpack(tokens)) > ${WAKE_CAP} then
    redis.call('LTRIM', key, -${WAKE_CAP}, -1)
  end
end

-- Wake every idle worker in its long pop (wait.py): a job is claimed, so a worker that dies now
-- would leave it behind, and the idle workers must sweep again until it is settled.
local function wake_idle()
  if redis.call('EXISTS', P .. ':quiet') == 1 then
    for _, key in ipairs(redis.call('SMEMBERS', P .. ':quiet')) do
      redis.call('RPUSH', key, '1')
      redis.call('EXPIRE', key, ${IDLE_TOKEN_TTL})
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
local function delete_claimed(id, token)
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

-- The waiting (ready or delayed) jobs of queue `q` per fair key, `P:queue:<q>:fairn`
-- (key -> jobs; the jobs without a key under ''): moved by `by` for a job of fair key
-- `fk` (nil: not a job of a fair queue), a key at 0 let go. O(1): one HINCRBY.
local function count_fair(q, fk, by)
  if fk then
    local counts = qkey(q, 'fairn')
    if redis.call('HINCRBY', counts, fk, by) <= 0 then redis.call('HDEL', counts, fk) end
  end
end

-- Put job `id` (hash `k`, available at `avail`) in its queue's ready or delayed set.
-- A job of a fair queue keeps its fair tag (`ft`, see fair_tag in _push_jobs.lua) as its
-- place in line: released, requeued or made due, it comes back in its key's turn.
local function enqueue(k, q, id, avail, now)
  local f = redis.call('HMGET', k, 'priority', 'ft')
  local m = member(f[2] or avail, id)
  redis.call('HSET', k, 'member', m)
  if tonumber(avail) <= tonumber(now) then
    redis.call('ZADD', qkey(q, 'ready'), -tonumber(f[1] or '0'), m)
  else
    redis.call('ZADD', qkey(q, 'delayed'), avail, id)
  end
end

-- Return a claimed job to its queue, due at `avail`; it keeps its unique key
-- unless another waiting job took it meanwhile.
-- `how` (see Store.release): 'started', the claim is not charged a try (it counts in
-- attempts, and in uncounted); 'unstarted', its attempt is taken back; else charged.
-- Add `attempt` (a table: its started, ended, error) to the attempt log of job hash
-- `k` (field attempt_log, JSON), its number and worker read from the hash as the claim
-- left them: called before unclaim. The log keeps the first ${KEEP_FIRST} and the last
-- ${KEEP_LAST} attempts: one past them drops the oldest of the last ones.
local function add_attempt(k, attempt)
  local f = redis.call('HMGET', k, 'attempts', 'claimed_by', 'attempt_log')
  attempt.attempt = tonumber(f[1] or '0')
  attempt.worker = f[2] or ''
  local log = f[3] and cjson.decode(f[3]) or {}
  log[#log + 1] = attempt
  if #log > ${KEEP_FIRST} + ${KEEP_LAST} then table.remove(log, ${KEEP_FIRST} + 1) end
  redis.call('HSET', k, 'attempt_log', cjson.encode(log))
end

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
  count_fair(q, redis.call('HGET', k, 'fk'), 1)
end
