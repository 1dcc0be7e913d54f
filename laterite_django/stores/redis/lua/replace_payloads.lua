-- ARGV: prefix, then triples: job id, the payload read, the payload to set. Sets each
-- job's payload if the job is still there, unclaimed (no token) and still holds the
-- payload read: a claim, a debounced push or a finish since it was read wins (queue_rekey).
-- Returns how many were set.
--!include _common.lua
local count = 0
for i = 2, #ARGV, 3 do
  local k = jkey(ARGV[i])
  if redis.call('HEXISTS', k, 'token') == 0 and redis.call('HGET', k, 'payload') == ARGV[i + 1] then
    redis.call('HSET', k, 'payload', ARGV[i + 2])
    count = count + 1
  end
end
return count
