-- ARGV: prefix, worker id, seconds a lost entry is kept, then the entry's field, value
-- pairs. Writes the worker's hash P:workers:<id> with beat_at, the server's now (TIME),
-- lets it expire once lost that long, scores the id in P:workers by the same beat and
-- removes the ids lost longer than that from it. Returns the beat.
--!include _common.lua
local id, keep = ARGV[2], tonumber(ARGV[3])
local now = clock()
local key = P .. ':workers:' .. id
redis.call('HSET', key, 'beat_at', now, unpack(ARGV, 4))
redis.call('EXPIRE', key, keep)
redis.call('ZADD', P .. ':workers', now, id)
redis.call('ZREMRANGEBYSCORE', P .. ':workers', '-inf',
           string.format('(%.0f', tonumber(now) - keep * 1000000))
return now
