-- ARGV: prefix, then per job: id, token, progress text. Returns how many were stored.
local P = ARGV[1]
local count = 0
for i = 2, #ARGV, 3 do
  local k = P .. ':job:' .. ARGV[i]
  if redis.call('HGET', k, 'token') == ARGV[i + 1] then
    redis.call('HSET', k, 'progress', ARGV[i + 2])
    count = count + 1
  end
end
return count
