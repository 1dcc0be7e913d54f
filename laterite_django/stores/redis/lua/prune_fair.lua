-- ARGV: prefix, queue, HSCAN cursor ('0' to start), count. Forgets, of the `count` or
-- so fields of the queue's turns (P:queue:<q>:fair, see fair_tag in _push_jobs.lua)
-- this step of the scan reaches, the end of each key's turn that no job of the key
-- waiting needs (P:queue:<q>:fairn counts none) and that is no later than the place any
-- key would get at its next push anyway: the server's clock (where a priority without a
-- virtual time starts) and, at each priority with a ready job, the virtual time the next
-- push reads there (its '.v' and its first ready job's place, the later). A push of the
-- key then gets the place it would have got with it: no turn to come changes. At a
-- priority where nothing is ready the line starts again, for every key alike.
-- The first step (cursor '0') of a queue where nothing waits at all also drops its
-- counts per key, which can then only be 0. Returns {next cursor ('0': done), forgotten}.
--!include _common.lua
local q, cursor, count = ARGV[2], ARGV[3], ARGV[4]
local turns, counts, ready = qkey(q, 'fair'), qkey(q, 'fairn'), qkey(q, 'ready')
if cursor == '0' and redis.call('ZCARD', ready) == 0
    and redis.call('ZCARD', qkey(q, 'delayed')) == 0 then
  redis.call('DEL', counts)
end
local now = tonumber(clock())
local bound = now
-- Each priority with a ready job, highest first (score: -priority), by one look-up each.
local score = '-inf'
while true do
  local r = redis.call('ZRANGEBYSCORE', ready, score, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #r == 0 then break end
  local p = 0 - tonumber(r[2])
  local v = tonumber(redis.call('HGET', turns, '.v' .. p) or now)
  bound = math.min(bound, math.max(v, tonumber(string.sub(r[1], 1, 17))))
  score = '(' .. r[2]
end
local found = redis.call('HSCAN', turns, cursor, 'MATCH', 'k:*', 'COUNT', count)
local forgotten = 0
for i = 1, #found[2], 2 do
  local field = found[2][i]
  if tonumber(found[2][i + 1]) <= bound
      and redis.call('HEXISTS', counts, string.sub(field, 3)) == 0 then
    redis.call('HDEL', turns, field)
    forgotten = forgotten + 1
  end
end
return {found[1], forgotten}
