-- ARGV: prefix, then id, token pairs. Deletes the jobs whose claims are still held.
-- Returns one code per pair: 1 deleted, 0 the job is gone, -1 it is under another
-- claim or waiting again (the claim was lost). Safe to repeat.
--!include _common.lua
local out = {}
for i = 2, #ARGV, 2 do out[#out + 1] = delete_claimed(ARGV[i], ARGV[i + 1]) end
return out
