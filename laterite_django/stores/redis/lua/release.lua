-- ARGV: prefix, now (not read), id, token, available_at (a moment, or '+<us>' from the
-- server's now: see _common.lua), error, how ('started', 'unstarted' or '': see
-- unclaim), the attempt to add to the job's attempt log ('' for none: a JSON object of
-- its started, ended and error, to which its number and worker are added from the
-- hash), and the job's checkpoint text to store with it, if any (a snooze). Returns 1
-- if the claim was still held (the job is back in its queue), else 0.
-- Due or not is the server's clock's (TIME), the one a claim reads.
-- The attempt log (field attempt_log, JSON) keeps the first ${KEEP_FIRST} and the last ${KEEP_LAST}
-- attempts: one past them drops the oldest of the last ones.
--!include _common.lua
local id, token, err, how = ARGV[3], ARGV[4], ARGV[6], ARGV[7]
local k = jkey(id)
if redis.call('HGET', k, 'token') ~= token then return 0 end
local now = clock()
local avail = due_at(ARGV[5], now)
local q = redis.call('HGET', k, 'queue')
if ARGV[8] and ARGV[8] ~= '' then
  local attempt = cjson.decode(ARGV[8])
  local f = redis.call('HMGET', k, 'attempts', 'claimed_by', 'attempt_log')
  attempt.attempt = tonumber(f[1] or '0')
  attempt.worker = f[2] or ''
  local log = f[3] and cjson.decode(f[3]) or {}
  log[#log + 1] = attempt
  if #log > ${KEEP_FIRST} + ${KEEP_LAST} then table.remove(log, ${KEEP_FIRST} + 1) end
  redis.call('HSET', k, 'attempt_log', cjson.encode(log))
end
if ARGV[9] then redis.call('HSET', k, 'checkpoint', ARGV[9]) end
unclaim(k, q, id, avail, now, err, how)
wake(q, 1)
return 1
