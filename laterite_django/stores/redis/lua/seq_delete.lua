-- ARGV: prefix, mode ('done': the jobs ran; 'failed': they failed for good or were
-- cancelled), then id, token pairs. Deletes the jobs whose claims are still held, and
-- moves their sequences on, or holds them (seq_delete in _sequence.lua). Returns one code
-- per pair, as delete.lua. Safe to repeat.
--!include _sequence.lua
local now = clock()
local out = {}
for i = 3, #ARGV, 2 do out[#out + 1] = seq_delete(ARGV[i], ARGV[i + 1], ARGV[2], now) end
return out
