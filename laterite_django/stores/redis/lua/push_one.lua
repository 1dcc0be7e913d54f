-- PUSH for one job without a unique key, in the fewest Lua steps: no helpers defined,
-- no JSON, one HSET of literal fields. Every redis.call and helper costs the server
-- microseconds, and on a lone push the server's time is most of what the pusher waits
-- for beyond the round trip (bench/profile_push.py). It stores exactly what PUSH stores
-- (tests/stores/redis/test_push_one.py compares the two).
-- ARGV: prefix, now (not read), name, queue, payload, priority, pushed_at, available_at
-- (as PUSH's), retry_until ('' for none), then as PUSH's ARGV[5..7]. Returns {id}.
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
if redis.call('RPUSH', q .. 'wake', '1') > ${WAKE_CAP} then
  redis.call('LTRIM', q .. 'wake', -${WAKE_CAP}, -1)
end
redis.call('SET', sent, number .. ':' .. id, 'EX', ${SENT_TTL})
return {tonumber(id)}
