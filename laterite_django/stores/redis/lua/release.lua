-- ARGV: prefix, now (not read), id, token, available_at (a moment, or '+<us>' from the
-- server's now: see _common.lua), error, how ('started', 'unstarted' or '': see
-- unclaim), the attempt to add to the job's attempt log ('' for none: a JSON object of
-- its started, ended and error, to which its number and worker are added from the
-- hash), and the job's checkpoint text to store with it, if any (a snooze). Returns 1
-- if the claim was still held (the job is back in its queue), else 0.
-- Due or not is the server's clock's (TIME), the one a claim reads.
--!include _common.lua
local id, token, err, how = ARGV[3], ARGV[4], ARGV[6], ARGV[7]
local k = jkey(id)
if redis.call('HGET', k, 'token') ~= token then return 0 end
local now = clock()
local avail = due_at(ARGV[5], now)
local q = redis.call('HGET', k, 'queue')
if ARGV[8] and ARGV[8] ~= '' then add_attempt(k, cjson.decode(ARGV[8])) end
if ARGV[9] then redis.call('HSET', k, 'checkpoint', ARGV[9]) end
unclaim(k, q, id, avail, now, err, how)
wake(q, 1)
return 1
