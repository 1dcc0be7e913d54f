-- ARGV: prefix, then triples: a record's position in P:history (history_listed.lua), the
-- payload read in it, the payload to set. Sets each record's payload if it is still
-- listed at that position and still holds the payload read (queue_rekey); one a move
-- took off meanwhile is left as it is (its row in the history table is the command's
-- next place). Returns how many were set.
local list = ARGV[1] .. ':history'
local taken = tonumber(redis.call('GET', list .. ':taken') or '0')
local count = 0
for i = 2, #ARGV, 3 do
  local index = tonumber(ARGV[i]) - taken - 1
  local entry = index >= 0 and redis.call('LINDEX', list, index)
  if entry then
    local ok, record = pcall(cjson.decode, entry)
    if ok and type(record) == 'table' and record[4] == ARGV[i + 1] then
      record[4] = ARGV[i + 2]
      redis.call('LSET', list, index, cjson.encode(record))
      count = count + 1
    end
  end
end
return count
