-- push.lua for jobs of which some have a concurrency limit: two more values per job,
-- the concurrency key and limit ('' for none), kept on the job's hash (see
-- claim_limited.lua). ARGV and answer as push.lua's.
--!include _push_jobs.lua
return push_once(11)
