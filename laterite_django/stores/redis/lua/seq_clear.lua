-- ARGV: prefix, queue ('' for every queue). After clear.lua: deletes the jobs of that queue
-- held behind their sequences' heads, and moves on each sequence whose head is gone
-- neither failed. Returns how many held jobs it deleted.
--!include _sequence.lua
local now = clock()
local count = 0
for _, key in ipairs(redis.call('SMEMBERS', P .. ':seqs')) do
  local s = skey(key)
  for _, id in ipairs(redis.call('ZRANGE', s .. ':held', 0, -1)) do
    local k = jkey(id)
    local q = redis.call('HGET', k, 'queue')
    if not q or ARGV[2] == '' or q == ARGV[2] then
      redis.call('ZREM', s .. ':held', id)
      if q then
        drop_key(k, id)
        redis.call('DEL', k)
        count = count + 1
      end
    end
  end
  local f = redis.call('HMGET', s, 'head', 'failed')
  if f[1] and f[2] ~= '1' and redis.call('EXISTS', jkey(f[1])) == 0 then seq_next(key, now) end
end
return count
