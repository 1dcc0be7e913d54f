"""The limits on how many jobs run at once and how fast they start, as parsed from
LATERITE_QUEUE_LIMITS, and the `Limits` a claim applies (flow/limits.py reads them from
the settings and the registry; the stores enforce them inside their claim).

    LATERITE_QUEUE_LIMITS = {"mail": {"concurrency": 5, "rate": "100/m"}}

A queue's `concurrency`: at most N of its jobs running at once; its `rate`
"N/s", "N/m" or "N/h": at most N of its jobs started per period (any window of
that length).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "NO_LIMITS",
    "Limits",
    "QueueLimit",
    "limits_problem",
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



@dataclass(frozen=True, slots=True)
class Limits:
    """The limits a claim applies: those of its queues that have any, and whether
    concurrency keys may apply (a job registered in the claiming process, or a Task
    defined there, declares `concurrency`: its jobs may be in any queue)."""

    queues: dict[str, QueueLimit] = field(default_factory=dict)
    keys: bool = False

    def __bool__(self) -> bool:
        """Whether a limit may apply: then the claim is the limited one."""
        return bool(self.queues) or self.keys


NO_LIMITS = Limits()
