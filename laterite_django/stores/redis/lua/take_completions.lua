-- ARGV: prefix, a list of ends, the ends read from its head (joined by newlines).
-- Takes them off: at once if the head is still those, else each by value.
local key, read = ARGV[2], ARGV[3]
local wanted = {}
for v in string.gmatch(read, '[^\n]+') do wanted[#wanted + 1] = v end
local head = redis.call('LRANGE', key, 0, #wanted - 1)
if table.concat(head, '\n') == read then
  redis.call('LTRIM', key, #wanted, -1)
else
  for _, v in ipairs(wanted) do redis.call('LREM', key, 1, v) end
end
return #wanted
