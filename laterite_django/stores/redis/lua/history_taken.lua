-- ARGV: prefix, count, first. The first `count` records of P:history moved to the
-- database: taken off the list, if it still starts with `first` (another worker that
-- moved the same records took them off already). Returns 1 if taken, else 0.
local list = ARGV[1] .. ':history'
if redis.call('LINDEX', list, 0) == ARGV[3] then
  redis.call('LTRIM', list, tonumber(ARGV[2]), -1)
  return 1
end
return 0
