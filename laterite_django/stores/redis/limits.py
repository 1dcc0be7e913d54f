"""The Redis store's limited push and claim: LATERITE_QUEUE_LIMITS and
`@job(concurrency=...)` enforced inside the claim script (see core/limits.py).

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

from collections.abc import Sequence
from typing import Any

from ...core.limits import QueueLimit
from ...core.values import NewJob
from .values import job_fields, pack

__all__ = ["claim_args", "push_fair_args", "push_limited_args"]

def push_limited_args(now: str, jobs: Sequence[NewJob], once: Sequence[str] | None = None
                      ) -> list[Any]:
    """PUSH_LIMITED's arguments after the prefix, up to its sender's: PUSH's, two more
    values per job."""
    return [now, pack(
        value for job in jobs for value in (
            *job_fields(job), job.concurrency_key or "",
            "" if job.concurrency_limit is None else str(job.concurrency_limit))),
        "" if once is None else pack(once)]


def push_fair_args(now: str, jobs: Sequence[NewJob], once: Sequence[str] | None = None
                   ) -> list[Any]:
    """PUSH_FAIR's arguments after the prefix, up to its sender's: PUSH_LIMITED's, two
    more values per job (its fair key and cost, '' for none: lua/push_fair.lua)."""
    return [now, pack(
        value for job in jobs for value in (
            *job_fields(job), job.concurrency_key or "",
            "" if job.concurrency_limit is None else str(job.concurrency_limit),
            job.fair_key or "", "" if job.fair_cost is None else str(job.fair_cost))),
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
