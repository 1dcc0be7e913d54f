"""The running sums behind `/metrics`: every tally handed on, added up.

Owned by the process that serves the metrics (the supervisor, or the worker when it
runs alone), so a worker process that ends takes none of them with it. Tallies come
from the supervisor's loop (or the worker's thread); scrapes read from the server's
thread: a lock keeps each side whole.
"""

from __future__ import annotations

import threading
from typing import Any

from ..worker.tally import new_histogram

__all__ = ["Totals"]


class Totals:
    """Counts per (queue, job, outcome); duration histograms per (queue, job); wait
    histograms per queue."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.jobs: dict[tuple[str, str, str], int] = {}
        self.durations: dict[tuple[str, str], list[float]] = {}
        self.waits: dict[str, list[float]] = {}

    def add(self, data: dict[str, Any]) -> None:
        """Add one tally (`Tally.flush`'s data, as sent over a pipe or handed directly)."""
        with self._lock:
            for queue, job, outcome, n in data.get("jobs", ()):
                key = (str(queue), str(job), str(outcome))
                self.jobs[key] = self.jobs.get(key, 0) + int(n)
            for queue, job, histogram in data.get("durations", ()):
                _merge(self.durations.setdefault((str(queue), str(job)), new_histogram()),
                       histogram)
            for queue, histogram in data.get("waits", ()):
                _merge(self.waits.setdefault(str(queue), new_histogram()), histogram)

    def count(self, queue: str, job: str, outcome: str) -> None:
        """Count one attempt settled here (by the supervisor, for a worker it killed)."""
        self.add({"jobs": [[queue, job, outcome, 1]]})

    def snapshot(
        self,
    ) -> tuple[dict[tuple[str, str, str], int], dict[tuple[str, str], list[float]],
               dict[str, list[float]]]:
        """Copies of the sums, for one scrape."""
        with self._lock:
            return (dict(self.jobs), {k: list(v) for k, v in self.durations.items()},
                    {k: list(v) for k, v in self.waits.items()})


def _merge(into: list[float], histogram: list[float]) -> None:
    if len(histogram) != len(into):
        return  # from a worker of another version: its buckets differ
    for index, value in enumerate(histogram):
        into[index] += value
