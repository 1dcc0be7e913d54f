-- ARGV: prefix, count, digest. The first `count` records of P:history moved to the
-- database: taken off the list if they are still the records the mover read (`digest`
-- is the SHA-1 of them joined by newlines), else left: another worker that moved the
-- same records took them off already, or queue_rekey re-encrypted one since it was read
-- (the next move finds its job written and mends that row: history.py). P:history:taken
-- counts the records ever taken off the front (history_listed.lua). Returns 1 if taken,
-- else 0.
local list = ARGV[1] .. ':history'
local count = tonumber(ARGV[2])
local found = redis.call('LRANGE', list, 0, count - 1)
if #found == count and redis.sha1hex(table.concat(found, '\n')) == ARGV[3] then
  redis.call('LTRIM', list, count, -1)
  redis.call('INCRBY', list .. ':taken', count)
  return 1
end
return 0
