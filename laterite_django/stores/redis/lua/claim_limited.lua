-- ARGV: prefix, now, token, worker, limit, again, then per queue in priority order:
-- name, concurrency, rate, period in microseconds ('' where none). Returns rows as
-- CLAIM (and, sent again, as CLAIM: what its first run took, counted by it).
--!include _claim.lua
-- Claimed jobs of a concurrency key, after dropping those no longer claimed.
local function running(ck)
  local set = P .. ':running:' .. ck
  for _, id in ipairs(redis.call('SMEMBERS', set)) do
    local k = jkey(id)
    if redis.call('EXISTS', k) == 0 or redis.call('HEXISTS', k, 'token') == 0 then
      redis.call('SREM', set, id)
    end
  end
  return redis.call('SCARD', set)
end
local queues, params = {}, {}
for qi = 7, #ARGV, 4 do
  queues[#queues + 1] = ARGV[qi]
  params[#params + 1] = {ARGV[qi + 1], ARGV[qi + 2], ARGV[qi + 3]}
end
return claim(queues, function(q, i)
  local conc, rate, period = params[i][1], params[i][2], params[i][3]
  local ready = qkey(q, 'ready')
  local room = 1000000
  if conc ~= '' then
    room = math.min(room, tonumber(conc) - redis.call('ZCARD', qkey(q, 'claimed')))
  end
  local starts = qkey(q, 'starts')
  if rate ~= '' then
    redis.call('ZREMRANGEBYSCORE', starts, '-inf', tonumber(now) - tonumber(period))
    room = math.min(room, tonumber(rate) - redis.call('ZCARD', starts))
  end
  local offset, scanned = 0, 0
  while #out < limit and room > 0 and scanned < ${CANDIDATES} do
    local members = redis.call('ZRANGE', ready, offset, offset)
    if #members == 0 then break end
    scanned = scanned + 1
    local m = members[1]
    local id = member_id(m)
    local k = jkey(id)
    if redis.call('EXISTS', k) == 0 then
      redis.call('ZREM', ready, m)
    else
      local lim = redis.call('HMGET', k, 'ck', 'cl')
      if lim[1] and running(lim[1]) >= tonumber(lim[2]) then
        offset = offset + 1  -- its key is at its limit: it keeps waiting, the next one may go
      else
        redis.call('ZREM', ready, m)
        if lim[1] then redis.call('SADD', P .. ':running:' .. lim[1], id) end
        if rate ~= '' then redis.call('ZADD', starts, now, token .. ':' .. id) end
        room = room - 1
        take(q, k, id)
      end
    end
  end
end)
