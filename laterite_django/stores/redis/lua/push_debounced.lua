-- A debounced push (Store.push_debounced): if a waiting job holds the key, replace it in
-- place (the new name, queue, payload, priority, retry window, concurrency key and
-- limit) and make it due `wait` from the server's now, but never later than its
-- `debounce_until` (its first push plus debounce_max); else store a new job that holds
-- the key, due `wait` from now, with its deadline `longest` from now. One script, so
-- no other push or claim comes between the look and the write: one waiting job per key.
-- A claimed job holds no key (the claim let it go): a push then stores a new job.
-- ARGV: prefix, now (not read), name, queue, payload, priority, pushed_at, wait (us),
-- retry_until ('' for none), key, longest (us, '' for no deadline), concurrency key and
-- limit ('' for none), once mark ('' for none: see _push_jobs.lua), then as PUSH's
-- sender, number and sent-again flag (resend.py).
-- Returns {id, 1 if a waiting job was replaced else 0}; {0, 0} for a mark set before.
--!include _common.lua
local name, queue, payload, priority = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local pushed_at, wait, retry_until, key = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local longest, ck, cl, mark = ARGV[11], ARGV[12], ARGV[13], ARGV[14]
local sent, number = P .. ':sent:' .. ARGV[15], ARGV[16]
if ARGV[17] == '1' then
  -- Sent again: if this push ran already, its answer, not a second replacement.
  local last = redis.call('GET', sent)
  if last and string.sub(last, 1, #number + 1) == number .. ':' then
    return cjson.decode(string.sub(last, #number + 2))
  end
end

local function answer(id, replaced)
  local result = {tonumber(id), replaced}
  redis.call('SET', sent, number .. ':' .. cjson.encode(result), 'EX', ${SENT_TTL})
  return result
end

if mark ~= '' and not redis.call(
    'SET', P .. ':once:' .. mark, '1', 'NX', 'EX', ${ONCE_TTL}) then
  return answer(0, 0)
end
local now = clock()
local avail = string.format('%.0f', tonumber(now) + tonumber(wait))
local deadline = nil
if longest ~= '' then deadline = string.format('%.0f', tonumber(now) + tonumber(longest)) end

-- The fields a push gives, on a new job and a replaced one alike.
local function write(k)
  redis.call('HSET', k, 'name', name, 'queue', queue, 'payload', payload,
    'priority', priority, 'available_at', avail)
  if retry_until ~= '' then
    redis.call('HSET', k, 'retry_until', retry_until)
  else
    redis.call('HDEL', k, 'retry_until')
  end
  if ck ~= '' then
    redis.call('HSET', k, 'ck', ck, 'cl', cl)
  else
    redis.call('HDEL', k, 'ck', 'cl')
  end
end

local holder = redis.call('HGET', P .. ':unique', key)
local id
local replaced = 0
if holder and redis.call('EXISTS', jkey(holder)) == 1
    and redis.call('HEXISTS', jkey(holder), 'token') == 0 then
  id, replaced = holder, 1
  local k = jkey(id)
  local f = redis.call('HMGET', k, 'queue', 'member', 'debounce_until')
  local until_ = f[3]
  if not until_ and deadline then
    until_ = deadline
    redis.call('HSET', k, 'debounce_until', until_)
  end
  if until_ and tonumber(until_) < tonumber(avail) then avail = until_ end
  -- Out of its old place (its queue's ready or delayed set), into its new one.
  if f[2] then redis.call('ZREM', qkey(f[1], 'ready'), f[2]) end
  redis.call('ZREM', qkey(f[1], 'delayed'), id)
  write(k)
else
  id = new_id()
  local k = jkey(id)
  redis.call('HSET', k, 'pushed_at', pushed_at, 'attempts', 0, 'last_error', '',
    'claimed_by', '', 'unique_key', key)
  if deadline then redis.call('HSET', k, 'debounce_until', deadline) end
  write(k)
  redis.call('HSET', P .. ':unique', key, id)
end
enqueue(jkey(id), queue, id, avail, now)
redis.call('SADD', P .. ':queues', queue)
wake(queue, 1)
return answer(id, replaced)
