"""Limits on how many jobs run at once and how fast they start (LATERITE_QUEUE_LIMITS,
`@job(concurrency=...)`): their rules and their parsed form.

The limits are enforced inside the store's claim (DatabaseStore._claim_limited), so
two workers racing can never together exceed one. This module reads them from the
settings and the registry (their parsed form: core/limits.py):

    LATERITE_QUEUE_LIMITS = {"mail": {"concurrency": 5, "rate": "100/m"}}

A queue's `concurrency`: at most N of its jobs running at once; its `rate`
"N/s", "N/m" or "N/h": at most N of its jobs started per period (any window of
that length). A job's `concurrency` (with `concurrency_key`): at most N of its
jobs running at once per key, or per job name without a key.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..conf import settings
from ..core.limits import Limits, QueueLimit, parse_limits
from ..registry import registry

__all__ = ["any_job_limited", "claim_share", "limits_of", "note_limited_task", "queue_limits"]


def queue_limits(queues: Sequence[str]) -> dict[str, QueueLimit]:
    """The limits of those of `queues` that have any (LATERITE_QUEUE_LIMITS)."""
    configured = settings.LIMITS
    if not configured:
        return {}
    limits = parse_limits(configured)
    return {queue: limits[queue] for queue in queues if queue in limits}


_shares: tuple[object, dict[tuple[str, ...], int | None]] = (None, {})


def claim_share(queues: Sequence[str]) -> int | None:
    """The most jobs one claim takes where a queue of `queues` has a concurrency limit:
    half the smallest such limit, rounded up (None: no such limit). A claimed job
    counts as running, so a worker whose batch took all of a queue's room would leave
    the others idle while it runs the batch one job after another."""
    global _shares
    configured = settings.LIMITS
    if _shares[0] is not configured:
        _shares = (configured, {})
    key = tuple(queues)
    if key not in _shares[1]:
        limits = [lim.concurrency for lim in queue_limits(queues).values()
                  if lim.concurrency is not None]
        _shares[1][key] = (min(limits) + 1) // 2 if limits else None
    return _shares[1][key]


_limited_jobs: tuple[int, bool] = (-1, False)
# Module paths of the django.tasks Tasks defined in this process with a concurrency
# limit (their own, or their backend's OPTIONS["CONCURRENCY"]): noted as each is
# defined, which a worker does at start-up for every installed app's `tasks` module.
limited_tasks: set[str] = set()


def note_limited_task(path: str) -> None:
    """Note that the Task at `path` runs under a concurrency limit (see any_job_limited)."""
    limited_tasks.add(path)


def any_job_limited() -> bool:
    """Whether a registered job, or a Task defined here, declares `concurrency` (their
    jobs may be in any queue): then every claim must be the limited one."""
    global _limited_jobs
    if limited_tasks:
        return True
    size = len(registry)
    if _limited_jobs[0] != size:
        _limited_jobs = (size, any(getattr(j, "concurrency", None) for j in registry))
    return _limited_jobs[1]


def limits_of(queues: Sequence[str]) -> Limits:
    """The limits a claim of `queues` applies (read as `queue_limits` and
    `any_job_limited` read them)."""
    return Limits(queue_limits(queues), any_job_limited())
