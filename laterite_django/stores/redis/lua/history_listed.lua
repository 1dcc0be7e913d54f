-- ARGV: prefix, after, limit. Up to `limit` records of P:history whose position is above
-- `after`, and the position of the first (a string); [] if none. A record's position is
-- its place counted from the first record ever listed (P:history:taken counts those taken
-- off the front), so it stays the same while moves take records off: queue_rekey reads
-- the list a chunk at a time by it, and history_reseal.lua finds a record by it.
local list = ARGV[1] .. ':history'
local taken = tonumber(redis.call('GET', list .. ':taken') or '0')
local start = math.max(tonumber(ARGV[2]) - taken, 0)
local found = redis.call('LRANGE', list, start, start + tonumber(ARGV[3]) - 1)
if #found == 0 then return {} end
return {string.format('%.0f', taken + start + 1), found}
