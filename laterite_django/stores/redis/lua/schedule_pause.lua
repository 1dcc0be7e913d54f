-- ARGV: prefix, name, paused ('1'/'0'), now. A resumed schedule fires no tick up to now.
local s = ARGV[1] .. ':schedule:' .. ARGV[2]
local now = ARGV[4]
redis.call('HSETNX', s, 'last_tick', now)
redis.call('SADD', ARGV[1] .. ':schedules', ARGV[2])
redis.call('HSET', s, 'paused', ARGV[3])
if ARGV[3] == '0' then
  local last = redis.call('HGET', s, 'last_tick')
  if last == '' or tonumber(last) < tonumber(now) then redis.call('HSET', s, 'last_tick', now) end
end
return redis.call('HGETALL', s)
