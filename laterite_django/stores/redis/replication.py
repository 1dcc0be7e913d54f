"""A Redis push that waits for a replica (LATERITE_QUEUE_REDIS_WAIT), so a failover of
the primary cannot lose a push it acknowledged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...core.values import NewJob
from ...exceptions import PushNotReplicated
from ..errors import describe_redis
from . import limits as redis_limits
from . import scripts as calls
from .values import PUSH_CHUNK, push_packed

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["push"]

def push(store: RedisStore, now: str, jobs: Sequence[NewJob], wait: float,
         once: Sequence[str] | None = None) -> list[int | None]:
    """Push, then wait up to `wait` seconds for one replica to have the jobs.

    Redis replicates asynchronously: a push the primary acknowledged is lost if
    the primary fails before a replica copied it. With LATERITE_QUEUE_REDIS_WAIT
    a push returns once a replica has it, and raises PushNotReplicated if none
    confirmed it in time (the jobs are on the primary all the same).
    """
    if any(job.concurrency_limit for job in jobs):
        steps = [("push_limited", redis_limits.push_limited_args(now, jobs, once))]
    else:
        steps = [("push", push_packed(now, jobs[i : i + PUSH_CHUNK],
                                      None if once is None else once[i : i + PUSH_CHUNK]))
                 for i in range(0, len(jobs), PUSH_CHUNK)]
    ids: list[int | None] = []
    replicas = 1
    for name, args in steps:  # one chunk at a time, each its own push (redis_resend)
        result, confirmed = calls.run_push_replicated(
            store.client, name, [store.prefix, *args], wait)
        ids += [int(i) or None for i in result]
        replicas = min(replicas, confirmed)
    if replicas < 1:
        raise PushNotReplicated(
            f"The redis store pushed {len(jobs)} job(s) to {describe_redis(store.alias)}, "
            f"but no replica confirmed them within {wait:g} s "
            f"(LATERITE_QUEUE_REDIS_WAIT): a failover now would lose them.", ids)
    return ids
