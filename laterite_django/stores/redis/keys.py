"""The Redis store's key layout under its prefix, and the sizes and lifetimes of its
keys that the Lua scripts (lua/, run by scripts.py) share with the Python side.

Every script takes the key prefix as ARGV[1] and builds its keys from it, so
one script serves any queue. On a Redis Cluster (cluster.py) the prefix is the hash
tag `{P}`: every key below then hashes to one slot, where each script runs (it
declares the tag as its key). The layout under the prefix `P`:

    P:id                   counter for job ids (INCR)
    P:job:<id>             hash: one job (name, queue, payload, priority, pushed_at,
                           available_at, attempts, uncounted, retry_until, unique_key,
                           last_error, member; while claimed: token, claimed_at, claimed_by and
                           position, its place in the claimed batch; while being moved
                           to the failed list: failing; a debounced job: debounce_until,
                           the latest a push with its key may make it due)
    P:queues               set of the queue names ever pushed to
    P:unique               hash: unique key -> id of the *waiting* job that holds it
    P:queue:<q>:ready      zset of due jobs: score -priority, member "<available_at>:<id>"
                           zero-padded, so equal scores sort oldest first, then by id
    P:queue:<q>:delayed    zset of jobs not yet due: score available_at, member id
    P:queue:<q>:claimed    zset of claimed jobs: score the last heartbeat, member id
    P:queue:<q>:wake       list that idle workers block on (BLPOP); a push adds to it
    P:queue:<q>:fair       hash of a fair queue's turns (fair_tag in lua/_push_jobs.lua):
                           per priority its virtual time and last end, per key ('k:<key>')
                           where its turn ends; pruned by lua/prune_fair.lua
    P:queue:<q>:fairn      hash: fair key -> its waiting (ready or delayed) jobs, moved by
                           one by the scripts that push, claim, release or remove a job
                           of a fair queue (count_fair in lua/_common.lua; its hash: fk)
    P:seq:<key>            hash: a sequence's head (its job id) and failed ('1': it failed
                           for good and holds the rest); a job of a sequence keeps its key
                           in its hash's sk, '1' in sc if the rest go on after a failure,
                           and held '1' while it waits behind the head (lua/_sequence.lua)
    P:seq:<key>:held       zset of the jobs held behind the head: score and member the id
    P:seqs                 set of the keys with a head; P:seq-failed, of the held ones
    P:paused               set of the paused queue names (flow control): CLAIM skips them
    P:quiet                set of the wake-up lists of idle workers in their long pop
                           (wait.py): the
                           next claim of any job pushes to each and empties it
    P:worker:<name>:wake   list an idle worker blocks on beside its queues' (wait.py)
    P:workers              zset of the live workers' ids (core.workers): score the last beat
    P:workers:<id>         hash: one worker's entry (name, host, pid, version, queues,
                           concurrency, started_at, beat_at, jobs), expiring once lost
    P:history              list: finished jobs' history records waiting to be moved to
                           the database's table (history.py, lua/record_finished.lua)
    P:history:taken        counter: the records ever taken off P:history's front, so that
                           a record's position stays put (lua/history_listed.lua)
    P:minutes:<n>          hash: the minute number n's counts for the admin's overview,
                           succeeded:<queue> and failed:<queue> (added by the workers
                           about once a second), latency:<queue> (seconds, sampled once
                           a minute); expiring after core.minutes.KEEP
    P:latency-sampled:<n>  string: set (NX, expiring) by the worker that samples minute
                           n's latencies; the others find it and leave the minute

Times are integer microseconds since the epoch. What is due is the server's clock's
(TIME, `clock()` in lua/_common.lua), never a caller's: a caller sends a moment
(push_at) as it is, and a due time counted from now (a push, push_in, a retry's
backoff) as '+<microseconds>', which the script adds to the server's now (`due_at`).
"""

from __future__ import annotations

__all__ = ["CANDIDATES", "IDLE_TOKEN_TTL", "ONCE_TTL", "SENT_TTL", "WAKE_CAP"]

# At most this many wake-up tokens wait per queue: enough to wake every idle worker
# at once, few enough that stale tokens cost idle workers only a few empty claims.
WAKE_CAP = 32
# Seconds an idle worker's wake-up token is kept: one that nobody pops (its worker is
# gone) goes by itself.
IDLE_TOKEN_TTL = 600
# Seconds a push's "once" mark is kept (the outbox's moves: see RedisStore.move_outbox).
ONCE_TTL = 7 * 24 * 3600
# Seconds a push's answer is kept for the same push sent again (resend.py): a push
# is sent again at once, or within redis-py's retries (seconds), never later.
SENT_TTL = 120
# Candidates the limited claim looks at per queue past the jobs of keys at their limit.
CANDIDATES = 200
