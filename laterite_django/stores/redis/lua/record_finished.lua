-- ARGV: prefix, then id, token, started, ended quadruples (epoch seconds, '' if not
-- known). Appends to the list P:history the record of each job still held under that
-- claim (run just before its deletion, in the same round trip): a JSON array of its
-- id, name, queue, payload, attempts, pushed_at (us), claimed_by, started, ended, and
-- its attempt log ('' if none: see release.lua).
-- The workers move the list to the database's JobRecord table (RedisStore.move_history);
-- at most its last 1,000,000 records wait there.
-- Returns how many were appended.
--!include _common.lua
local list = P .. ':history'
local n = 0
for i = 2, #ARGV, 4 do
  local k = jkey(ARGV[i])
  local f = redis.call('HMGET', k, 'token', 'name', 'queue', 'payload', 'attempts',
    'pushed_at', 'claimed_by', 'attempt_log')
  if f[1] == ARGV[i + 1] then
    redis.call('RPUSH', list, cjson.encode({ARGV[i], f[2], f[3], f[4], f[5] or '0',
      f[6] or '', f[7] or '', ARGV[i + 2], ARGV[i + 3], f[8] or ''}))
    n = n + 1
  end
end
-- Kept in bounds while the database is away (the moves fail): the oldest go first,
-- counted as taken off the front (history_listed.lua).
local over = n > 0 and redis.call('LLEN', list) - 1000000 or 0
if over > 0 then
  redis.call('LTRIM', list, over, -1)
  redis.call('INCRBY', list .. ':taken', over)
end
return n
