"""The Redis store's limited push and claim: LATERITE_QUEUE_LIMITS and
`@job(concurrency=...)` enforced inside the claim script (see flow/limits.py).

Used only when a limit may apply (a limited queue among the worker's, a
registered job with `concurrency`, or a pushed job that carries a limit);
otherwise the store's plain PUSH and CLAIM run, untouched.

Under the prefix `P`: a limited job's hash holds `ck` (its concurrency key) and
`cl` (its limit); `P:running:<key>` is the set of ids of that key's claimed
jobs, added to by the limited claim and cleaned there too (an id whose job is
gone or no longer claimed leaves the set), so no other script has to know of
it; `P:queue:<q>:starts` is a sorted set of the claims of a queue with a rate
(score: the claim's time), pruned past the period.

Why racing workers can never together exceed a limit: Redis runs one script
at a time, and the limited claim counts (running per key, the queue's claimed
set, its recent starts) and claims in the same script.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...flow.limits import QueueLimit
from ..base import NewJob
from .lua_push_claim import CLAIM_HEAD, PUSH
from .lua_settle import FINISH
from .values import job_fields, pack

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["CLAIM_LIMITED", "FINISH_LIMITED", "PUSH_LIMITED", "claim_args", "push_limited_args",
           "run"]

# Candidates the claim looks at per queue past the jobs of keys at their limit.
CANDIDATES = 200

def _limited(source: str) -> str:
    """A script that pushes jobs (PUSH, FINISH) taking two more values per job: the
    concurrency key and limit ('' for none), kept on the job's hash."""
    out = (
        source.replace("local n = #A / 9", "local n = #A / 11")
        .replace("local b = i * 9", "local b = i * 11")
        .replace(
            "local retry_until, has_key, key = A[b + 7], A[b + 8], A[b + 9]",
            "local retry_until, has_key, key = A[b + 7], A[b + 8], A[b + 9]\n"
            "  local ck, cl = A[b + 10], A[b + 11]",
        )
        .replace(
            "    redis.call('HSET', k, unpack(fields))",
            "    if ck ~= '' then\n"
            "      fields[#fields + 1] = 'ck'\n      fields[#fields + 1] = ck\n"
            "      fields[#fields + 1] = 'cl'\n      fields[#fields + 1] = cl\n"
            "    end\n"
            "    redis.call('HSET', k, unpack(fields))",
        )
    )
    assert out.count("A[b + 11]") == 1 and out.count("#A / 11") == 1 \
        and out.count("i * 11") == 1 and out.count("'ck'") == 1
    return out


# PUSH for jobs of which some have a concurrency limit (run by redis_calls.run_push).
PUSH_LIMITED = _limited(PUSH)
# FINISH (a finished job of a workflow) whose next link has a concurrency limit.
FINISH_LIMITED = _limited(FINISH)

# ARGV: prefix, now, token, worker, limit, again, then per queue in priority order:
# name, concurrency, rate, period in microseconds ('' where none). Returns rows as
# CLAIM (and, sent again, as CLAIM: what its first run took, counted by it).
CLAIM_LIMITED = CLAIM_HEAD + """
-- Claimed jobs of a concurrency key, after dropping those no longer claimed.
local function running(ck)
  local set = P .. ':running:' .. ck
  for _, id in ipairs(redis.call('SMEMBERS', set)) do
    local k = jkey(id)
    if redis.call('EXISTS', k) == 0 or redis.call('HEXISTS', k, 'token') == 0 then
      redis.call('SREM', set, id)
    end
  end
  return redis.call('SCARD', set)
end
if again then
  local queues = {}
  for qi = 7, #ARGV, 4 do queues[#queues + 1] = ARGV[qi] end
  local rows = taken_before(queues)
  if #rows > 0 then return rows end
end
for qi = 7, #ARGV, 4 do
  if #out >= limit then break end
  local q, conc, rate, period = ARGV[qi], ARGV[qi + 1], ARGV[qi + 2], ARGV[qi + 3]
  if redis.call('SISMEMBER', P .. ':paused', q) == 0 then
  local ready = qkey(q, 'ready')
  make_ready(q)
  local room = 1000000
  if conc ~= '' then
    room = math.min(room, tonumber(conc) - redis.call('ZCARD', qkey(q, 'claimed')))
  end
  local starts = qkey(q, 'starts')
  if rate ~= '' then
    redis.call('ZREMRANGEBYSCORE', starts, '-inf', tonumber(now) - tonumber(period))
    room = math.min(room, tonumber(rate) - redis.call('ZCARD', starts))
  end
  local offset, scanned = 0, 0
  while #out < limit and room > 0 and scanned < """ + str(CANDIDATES) + """ do
    local members = redis.call('ZRANGE', ready, offset, offset)
    if #members == 0 then break end
    scanned = scanned + 1
    local m = members[1]
    local id = member_id(m)
    local k = jkey(id)
    if redis.call('EXISTS', k) == 0 then
      redis.call('ZREM', ready, m)
    else
      local lim = redis.call('HMGET', k, 'ck', 'cl')
      if lim[1] and running(lim[1]) >= tonumber(lim[2]) then
        offset = offset + 1  -- its key is at its limit: it keeps waiting, the next one may go
      else
        redis.call('ZREM', ready, m)
        if lim[1] then redis.call('SADD', P .. ':running:' .. lim[1], id) end
        if rate ~= '' then redis.call('ZADD', starts, now, token .. ':' .. id) end
        room = room - 1
        take(q, k, id)
      end
    end
  end
  end
end
if #out > 0 then wake_quiet() end
return out
"""

_SHAS = {source: hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
         for source in (FINISH_LIMITED,)}


def run(client: Redis, source: str, args: Sequence[Any]) -> Any:
    """Run one of these scripts by its SHA, loading it on a miss."""
    from redis.exceptions import NoScriptError

    try:
        return client.execute_command("EVALSHA", _SHAS[source], 0, *args)
    except NoScriptError:
        return client.execute_command("EVAL", source, 0, *args)


def push_limited_args(now: str, jobs: Sequence[NewJob], once: Sequence[str] | None = None
                      ) -> list[Any]:
    """PUSH_LIMITED's arguments after the prefix, up to its sender's: PUSH's, two more
    values per job."""
    return [now, pack(
        value for job in jobs for value in (
            *job_fields(job), job.concurrency_key or "",
            "" if job.concurrency_limit is None else str(job.concurrency_limit))),
        "" if once is None else pack(once)]


def claim_args(within: int, token: str, worker: str, limit: int, queues: Sequence[str],
               limits: dict[str, QueueLimit]) -> list[Any]:
    """CLAIM_LIMITED's arguments after the prefix (`within`: see CLAIM_HEAD)."""
    args: list[Any] = [within, token, worker, int(limit), "0"]
    for queue in queues:
        lim = limits.get(queue, QueueLimit())
        args += [
            queue,
            "" if lim.concurrency is None else lim.concurrency,
            "" if lim.rate is None else lim.rate,
            "" if lim.period is None else int(lim.period * 1_000_000),
        ]
    return args
