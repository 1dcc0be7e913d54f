-- push.lua for jobs of which some are of a fair queue: push_limited.lua's values and two
-- more per job, the fair key ('' for the jobs without a key) and the virtual time one
-- job of it takes ('' for a job of a queue not served fairly); the job's place in its
-- ready set is then its fair tag (see fair_tag). ARGV and answer as push.lua's.
--!include _push_jobs.lua
return push_once(13)
