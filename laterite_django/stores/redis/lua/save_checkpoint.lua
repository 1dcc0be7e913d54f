-- ARGV: prefix, id, token, checkpoint text. Returns 1 if the claim was still held (the
-- text is the job's checkpoint now), else 0 (another run owns the job: what it saved stays).
local k = ARGV[1] .. ':job:' .. ARGV[2]
if redis.call('HGET', k, 'token') ~= ARGV[3] then return 0 end
redis.call('HSET', k, 'checkpoint', ARGV[4])
return 1
