-- ARGV: prefix, then id, token pairs. Returns how many claims were still held, each
-- refreshed by the server's clock (TIME, as CLAIM_HEAD dates them).
--!include _common.lua
local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local count = 0
for i = 2, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local k = jkey(id)
  if redis.call('HGET', k, 'token') == token then
    redis.call('HSET', k, 'claimed_at', now)
    redis.call('ZADD', qkey(redis.call('HGET', k, 'queue'), 'claimed'), 'XX', now, id)
    count = count + 1
  end
end
return count
