"""Limits on how many jobs run at once and how fast they start (LATERITE_QUEUE_LIMITS,
`@job(concurrency=...)`): their rules and their parsed form.

The limits are enforced inside the store's claim (DatabaseStore._claim_limited), so
two workers racing can never together exceed one. This module only reads them:

    LATERITE_QUEUE_LIMITS = {"mail": {"concurrency": 5, "rate": "100/m"}}

A queue's `concurrency`: at most N of its jobs running at once; its `rate`
"N/s", "N/m" or "N/h": at most N of its jobs started per period (any window of
that length). A job's `concurrency` (with `concurrency_key`): at most N of its
jobs running at once per key, or per job name without a key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..limits import UNIQUE_KEY_MAX, unfit

if TYPE_CHECKING:
    from ..jobs import JobFunction

__all__ = [
    "QueueLimit",
    "any_job_limited",
    "claim_share",
    "job_concurrency_key",
    "limits_problem",
    "note_limited_task",
    "parse_limits",
    "parse_rate",
]

_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*([smh])\s*$")
# The longest period a rate may have: starts older than this are pruned.
LONGEST_PERIOD = max(_PERIODS.values())


@dataclass(frozen=True, slots=True)
class QueueLimit:
    """One queue's limits: None where it has none."""

    concurrency: int | None = None
    rate: int | None = None  # starts per `period`
    period: float | None = None  # seconds


def parse_rate(value: Any) -> tuple[int, float]:
    """Return "N/s|m|h" as (N, seconds); raise ValueError naming the value."""
    match = _RATE.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"rate {value!r} is not N/s, N/m or N/h with N >= 1")
    return int(match.group(1)), _PERIODS[match.group(2)]


def limits_problem(value: Any) -> str | None:
    """Say what is wrong with a LATERITE_QUEUE_LIMITS value, naming it; None if good."""
    if not isinstance(value, Mapping):
        return "it must be a dict of queue name -> {'concurrency': N, 'rate': 'N/s|m|h'}"
    for queue, limit in value.items():
        if not isinstance(queue, str) or not queue:
            return f"queue name {queue!r} is not a non-empty string"
        if not isinstance(limit, Mapping) or not limit:
            return f"the limits of {queue!r} ({limit!r}) must be a non-empty dict"
        unknown = set(limit) - {"concurrency", "rate"}
        if unknown:
            return f"the limits of {queue!r} name {sorted(unknown)!r}; known: concurrency, rate"
        concurrency = limit.get("concurrency")
        if "concurrency" in limit and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            return f"the concurrency of {queue!r} ({concurrency!r}) must be an integer >= 1"
        if "rate" in limit:
            try:
                parse_rate(limit["rate"])
            except ValueError as e:
                return f"the {e} (queue {queue!r})"
    return None


def parse_limits(value: Mapping[str, Mapping[str, Any]]) -> dict[str, QueueLimit]:
    """LATERITE_QUEUE_LIMITS (already checked by `limits_problem`) as QueueLimits."""
    parsed = {}
    for queue, limit in value.items():
        rate, period = parse_rate(limit["rate"]) if "rate" in limit else (None, None)
        parsed[queue] = QueueLimit(limit.get("concurrency"), rate, period)
    return parsed


def queue_limits(queues: Sequence[str]) -> dict[str, QueueLimit]:
    """The limits of those of `queues` that have any (LATERITE_QUEUE_LIMITS)."""
    from ..conf import settings

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
    from ..conf import settings

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
    from ..registry import registry

    if limited_tasks:
        return True
    size = len(registry)
    if _limited_jobs[0] != size:
        _limited_jobs = (size, any(getattr(j, "concurrency", None) for j in registry))
    return _limited_jobs[1]


def job_concurrency_key(job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
                        ) -> str:
    """The key a job's `concurrency` counts under: its `concurrency_key`'s, or its name."""
    if job.concurrency_key is None:
        return job.name
    key = job.concurrency_key(*args, **kwargs)
    if key is None:
        return job.name
    if not isinstance(key, str):
        raise TypeError(
            f"Job {job.name!r}: concurrency_key returned {key!r}; it must return a str or None.")
    problem = unfit("the concurrency_key", key, UNIQUE_KEY_MAX)
    if problem:
        raise ValueError(f"Job {job.name!r}: {problem}.")
    return key
