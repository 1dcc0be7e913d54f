-- ARGV: prefix, then lists of ends. Forgets each that is empty (atomic with FINISH's
-- RPUSH and SADD: a list is never forgotten with an end in it).
local P = ARGV[1]
for i = 2, #ARGV do
  if redis.call('LLEN', ARGV[i]) == 0 then redis.call('SREM', P .. ':ended-lists', ARGV[i]) end
end
return 0
