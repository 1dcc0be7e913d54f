"""What a worker counts about its attempts, kept in memory and handed on in batches.

The per-job cost is a few dict and list updates; nothing is written anywhere until
a second has passed (`flush`), the worker goes idle or it stops. The counts go to
a `sink`: the `Totals` of the serving process, or the pipe to the supervisor.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from ..core.values import Claim

__all__ = ["BUCKETS", "OUTCOMES", "Tally"]

# Upper bounds (seconds) of the duration and wait histograms' buckets: jobs take
# from milliseconds to an hour.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
           300.0, 900.0, 3600.0)
# How a settled attempt is counted in laterite_jobs_total, by the worker's `Settled`
# word. A job given back (not an attempt) or whose claim was lost (settled by another)
# is not counted. A job cancelled while it ran settles as "failed" (it lands on the
# failed list), so it counts as failed. A snooze is counted apart.
OUTCOMES = {"succeeded": "succeeded", "retrying": "retried", "failed": "failed",
            "snoozed": "snoozed"}
# Seconds between two hand-overs while the worker is busy.
EVERY = 1.0


def new_histogram() -> list[float]:
    """One count per bucket, one for +Inf, then the sum of the values observed."""
    return [0] * (len(BUCKETS) + 1) + [0.0]


def observe(histogram: list[float], value: float) -> None:
    histogram[bisect_left(BUCKETS, value)] += 1
    histogram[-1] += value


class Tally:
    """The counts of one worker since its last hand-over."""

    def __init__(self, sink: Callable[[dict[str, Any]], None], every: float = EVERY) -> None:
        self.sink = sink
        self.every = every
        self._next = time.monotonic() + every
        self._clear()

    def _clear(self) -> None:
        self.jobs: dict[tuple[str, str, str], int] = {}
        self.durations: dict[tuple[str, str], list[float]] = {}
        self.waits: dict[str, list[float]] = {}

    def ended(self, claim: Claim, settled: str, duration: float) -> None:
        """Count one attempt of `claim`, settled as `settled` after `duration` seconds."""
        outcome = OUTCOMES.get(settled)
        if outcome is None:
            return
        key = (claim.queue, claim.name, outcome)
        self.jobs[key] = self.jobs.get(key, 0) + 1
        pair = (claim.queue, claim.name)
        histogram = self.durations.get(pair)
        if histogram is None:
            histogram = self.durations[pair] = new_histogram()
        observe(histogram, duration)
        if claim.available_at is not None:
            # From when it was due to when this attempt started.
            waited = time.time() - duration - claim.available_at.timestamp()
            histogram = self.waits.get(claim.queue)
            if histogram is None:
                histogram = self.waits[claim.queue] = new_histogram()
            observe(histogram, max(waited, 0.0))
        if time.monotonic() >= self._next:
            self.flush()

    def flush(self) -> None:
        """Hand the counts on now (if there are any) and start afresh."""
        self._next = time.monotonic() + self.every
        if not self.jobs:
            return
        data = {
            "jobs": [[*key, n] for key, n in self.jobs.items()],
            "durations": [[*key, h] for key, h in self.durations.items()],
            "waits": [[queue, h] for queue, h in self.waits.items()],
        }
        self._clear()
        self.sink(data)
