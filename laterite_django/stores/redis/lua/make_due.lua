-- ARGV: prefix, now (not read), then job ids. Makes the waiting or delayed ones due at
-- the server's now (TIME, the clock a claim reads; a job already due keeps its place)
-- and wakes the workers. Returns how many there were.
--!include _common.lua
local now = clock()
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
