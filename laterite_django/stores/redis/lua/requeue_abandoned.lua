-- ARGV: prefix, retry_after (microseconds), reason. The claims not refreshed for
-- retry_after by the server's clock (TIME: the clock that dated them, never a worker's,
-- see CLAIM_HEAD) are abandoned. Each abandoned claim goes back to its queue
-- keeping its available_at (first in line); one at position 0 of its batch is
-- charged a try, a later one (that may never have started) is not. Returns
-- {requeued, marked}: `marked` lists the abandoned claims that were being moved to
-- the failed list (id, token, name, queue, pushed_at), left in place for the
-- caller to settle against the database.
-- ARGV[4], then queue names: which queues keep history, whose jobs get the attempt
-- whose worker died added to their attempt log (its number and worker, no start nor
-- end, `reason` as its error): '' none, 'all' every queue but those named, 'only' those
-- named.
--!include _common.lua
local t = redis.call('TIME')
local at = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = string.format('%.0f', at)
local older, reason = string.format('%.0f', at - tonumber(ARGV[2])), ARGV[3]
local count = 0
local marked = {}
local logged, named = ARGV[4] or '', {}
for i = 5, #ARGV do named[ARGV[i]] = true end
local function keeps(q)
  if logged == 'all' then return not named[q] end
  return logged == 'only' and named[q] == true
end
for _, q in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  local claimed = qkey(q, 'claimed')
  local woken = 0
  local log = keeps(q)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', claimed, '-inf', '(' .. older)) do
    local k = jkey(id)
    if redis.call('EXISTS', k) == 0 then
      redis.call('ZREM', claimed, id)
    elseif redis.call('HEXISTS', k, 'failing') == 1 then
      local f = redis.call('HMGET', k, 'token', 'name', 'pushed_at')
      marked[#marked + 1] = {tonumber(id), f[1], f[2], q, f[3]}
    else
      local f = redis.call('HMGET', k, 'available_at', 'position')
      if log and tonumber(f[2] or '0') == 0 then
        add_attempt(k, {started = cjson.null, ended = cjson.null, error = reason})
      end
      unclaim(k, q, id, f[1] or now, now, reason,
        tonumber(f[2] or '0') > 0 and 'started' or '')
      count = count + 1
      woken = woken + 1
    end
  end
  if woken > 0 then wake(q, woken) end
end
return {count, marked}
