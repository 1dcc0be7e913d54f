-- ARGV: prefix, now, the caller's list of ends, then one JSON array: per finished
-- job of a workflow, its id, token, record and the jobs to push after it (an array
-- packed as for PUSH). Deletes each job whose claim is still held and, in the same
-- step, pushes the next link of its chain and appends the `record`s (its batch end,
-- '' for none) of those deleted to that list of ends the database has yet to count
-- (RedisStore._count_ends), as one item.
-- Returns one code per job: 1 deleted, 0 the job is gone, -1 the claim was lost.
--!include _finish.lua
return finish(9)
