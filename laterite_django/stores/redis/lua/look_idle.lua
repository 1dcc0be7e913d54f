-- ARGV: prefix, now, the worker's own wake-up list, then its queues. Returns
-- {1, earliest delayed job of its queues ('' for none)} when the worker is quiet, having
-- entered its list in P:quiet (emptied of the tokens of earlier wake-ups), else {0, ''}.
--!include _common.lua
local now, own = tonumber(ARGV[2]), ARGV[3]
local earliest = nil
for i = 4, #ARGV do
  local q = ARGV[i]
  if redis.call('ZCARD', qkey(q, 'ready')) > 0 then return {0, ''} end
  local first = redis.call('ZRANGE', qkey(q, 'delayed'), 0, 0, 'WITHSCORES')
  if first[2] then
    local at = tonumber(first[2])
    if at <= now then return {0, ''} end
    if not earliest or at < earliest then earliest = at end
  end
end
for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  if redis.call('ZCARD', qkey(q, 'claimed')) > 0 then return {0, ''} end
end
if redis.call('EXISTS', P .. ':ended-lists') == 1 then return {0, ''} end
redis.call('DEL', own)
redis.call('SADD', P .. ':quiet', own)
return {1, earliest and string.format('%.0f', earliest) or ''}
