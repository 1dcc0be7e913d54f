-- ARGV: prefix, key. Lets the held sequence `key` go on: its next job promoted, its failed
-- head no longer its head. Returns 1 if it was held, else 0.
--!include _sequence.lua
if redis.call('HGET', skey(ARGV[2]), 'failed') ~= '1' then return 0 end
seq_next(ARGV[2], clock())
return 1
