-- ARGV: prefix, id, token. Marks a held claim as being moved to the failed list.
--!include _common.lua
local k = jkey(ARGV[2])
if redis.call('HGET', k, 'token') ~= ARGV[3] then return 0 end
redis.call('HSET', k, 'failing', '1')
return 1
