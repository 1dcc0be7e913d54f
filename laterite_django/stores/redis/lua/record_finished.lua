-- ARGV: prefix, then id, token, started, ended quadruples (epoch seconds, '' if not
-- known). Appends to the list P:history the record of each job still held under that
-- claim (run just before its deletion, in the same round trip): a JSON array of its
-- id, name, queue, payload, attempts, pushed_at (us), claimed_by, started, ended.
-- The workers move the list to the database's JobRecord table (RedisStore.move_history).
-- Returns how many were appended.
--!include _common.lua
local list = P .. ':history'
local n = 0
for i = 2, #ARGV, 4 do
  local k = jkey(ARGV[i])
  local f = redis.call('HMGET', k, 'token', 'name', 'queue', 'payload', 'attempts',
    'pushed_at', 'claimed_by')
  if f[1] == ARGV[i + 1] then
    redis.call('RPUSH', list, cjson.encode({ARGV[i], f[2], f[3], f[4], f[5] or '0',
      f[6] or '', f[7] or '', ARGV[i + 2], ARGV[i + 3]}))
    n = n + 1
  end
end
return n
