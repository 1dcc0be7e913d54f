-- finish.lua where a next link has a concurrency limit: its jobs take two more values
-- each, as push_limited.lua's. ARGV and answer as finish.lua's.
--!include _finish.lua
return finish(11)
