-- ARGV: prefix, then key, job id pairs: failed jobs of sequences forgotten. A sequence
-- held by one of them goes on (its next job promoted, or the sequence ended).
--!include _sequence.lua
local now = clock()
for i = 2, #ARGV, 2 do seq_done(ARGV[i], ARGV[i + 1], now) end
return 1
