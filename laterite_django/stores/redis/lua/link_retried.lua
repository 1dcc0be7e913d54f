-- ARGV: prefix, then per retried job: its id, the failed job's id, that one's error.
-- Sets the link on each job still stored (one that already ran and left is not revived).
local P = ARGV[1]
for i = 2, #ARGV, 3 do
  local k = P .. ':job:' .. ARGV[i]
  if redis.call('EXISTS', k) == 1 then
    redis.call('HSET', k, 'retried_from_id', ARGV[i + 1], 'retried_from_error', ARGV[i + 2])
  end
end
return 0
