--!include _common.lua
-- Store the jobs of packed array A (see push.lua), `width` values per job: 9, 11 with
-- a concurrency key and limit ('' for none), kept on the job's hash (the limited push),
-- or 13 with a fair key and cost too ('' cost: not a fair job; push_fair.lua);
-- return their ids (0: a duplicate).
-- `once` (or nil): per job a mark ('' for none); a job whose mark was set by an
-- earlier push (within ONCE_TTL s) is not pushed again (its id: 0). Due times are the
-- server's clock's (see _common.lua).
-- The fair tag of a job of key `key` (its queue `q`, priority `p`, each job of the key
-- taking `cost` of virtual time; see core/fairness.py): the later of the queue's virtual
-- time and the end of the key's last job. The virtual time never goes back: the place of
-- the queue's first ready job of that priority, or, none ready, the end of the last job
-- given a place (the line starts again). Kept in `P:queue:<q>:fair`, per priority '.v'
-- and the priority the virtual time, '.e' and the priority that last end; 'k:' and the
-- key the end of the key's last job.
local function fair_tag(q, p, key, cost, now)
  local turns = qkey(q, 'fair')
  local vp, ep = '.v' .. p, '.e' .. p
  local f = redis.call('HMGET', turns, vp, ep, 'k:' .. key)
  local v, last = tonumber(f[1] or now), tonumber(f[2] or '0')
  local first = redis.call('ZRANGEBYSCORE', qkey(q, 'ready'), -p, -p, 'LIMIT', 0, 1)[1]
  if first then
    v = math.max(v, tonumber(string.sub(first, 1, 17)))
  else
    v = math.max(v, last)
  end
  local tag = math.max(v, tonumber(f[3] or '0'))
  redis.call('HSET', turns, vp, string.format('%.0f', v),
    ep, string.format('%.0f', math.max(last, tag + cost)),
    'k:' .. key, string.format('%.0f', tag + cost))
  return string.format('%.0f', tag)
end

local function push_jobs(A, once, width)
local now = clock()
local n = #A / width
local ids = {}
local pushed = {}
for i = 0, n - 1 do
  local b = i * width
  local name, queue, payload = A[b + 1], A[b + 2], A[b + 3]
  local priority, pushed_at, avail = A[b + 4], A[b + 5], due_at(A[b + 6], now)
  local retry_until, has_key, key = A[b + 7], A[b + 8], A[b + 9]
  local ck, cl = '', nil
  if width >= 11 then ck, cl = A[b + 10], A[b + 11] end
  local fk, fc = nil, ''
  if width == 13 then fk, fc = A[b + 12], A[b + 13] end
  local id = '0'
  if once and once[i + 1] ~= '' and not redis.call(
      'SET', P .. ':once:' .. once[i + 1], '1', 'NX', 'EX', ${ONCE_TTL}) then
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
    local ft = nil
    if fc ~= '' then ft = fair_tag(queue, tonumber(priority), fk, tonumber(fc), now) end
    local m = member(ft or avail, id)
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
    if ck ~= '' then
      fields[#fields + 1] = 'ck'
      fields[#fields + 1] = ck
      fields[#fields + 1] = 'cl'
      fields[#fields + 1] = cl
    end
    if ft then
      fields[#fields + 1] = 'ft'
      fields[#fields + 1] = ft
      fields[#fields + 1] = 'fk'
      fields[#fields + 1] = fk
    end
    redis.call('HSET', k, unpack(fields))
    if tonumber(avail) <= tonumber(now) then
      redis.call('ZADD', qkey(queue, 'ready'), -tonumber(priority), m)
    else
      redis.call('ZADD', qkey(queue, 'delayed'), avail, id)
    end
    if ft then count_fair(queue, fk, 1) end
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

-- The body of push.lua and push_limited.lua: store the packed jobs of ARGV[3] (`width`
-- values each), unless this push was sent again and ran already (see push.lua).
local function push_once(width)
  local sent, number = P .. ':sent:' .. ARGV[5], ARGV[6]
  if ARGV[7] == '1' then
    -- Sent again: if this push ran already, its ids, not a second copy of its jobs.
    local last = redis.call('GET', sent)
    if last and string.sub(last, 1, #number + 1) == number .. ':' then
      return cjson.decode(string.sub(last, #number + 2))
    end
  end
  local ids = push_jobs(cjson.decode(ARGV[3]), ARGV[4] ~= '' and cjson.decode(ARGV[4]) or nil,
    width)
  redis.call('SET', sent, number .. ':' .. cjson.encode(ids), 'EX', ${SENT_TTL})
  return ids
end
