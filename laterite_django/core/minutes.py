"""Jobs succeeded and failed per queue and minute: the admin overview's chart.

A worker counts in memory (`MinuteCounts.count`, a dict update per attempt) and
adds its counts to the store about once a second, when it goes idle and when it
stops (`Store.add_minutes`): one write per second per busy worker, whatever the
rate of jobs. Counts that could not be written are kept for the next try.

Beside them, each queue's latency (the age of its oldest due waiting job) once a minute:
a worker's heartbeat thread asks `worker.latency.LatencySampler.due` at each turn (a
clock read) and, once per minute, `Store.sample_latency`, which keeps the first sample of the minute
whichever worker takes it, so the cost is a round trip or two per worker per minute,
never one per job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["KEEP", "Minute", "MinuteCounts", "minute_start"]

# How long the store keeps a minute's counts (the overview shows the last hour, and the
# last 24 hours by quarters of an hour): 1,500 rows or hashes per queue at most.
KEEP = timedelta(hours=25)
# Seconds between two writes of a busy worker's counts.
EVERY = 1.0


@dataclass(frozen=True, slots=True)
class Minute:
    """One queue's counts for one minute."""

    queue: str
    minute: datetime  # its start, aware (UTC)
    succeeded: int = 0
    failed: int = 0
    # Seconds the oldest due waiting job had waited when a worker looked in this minute
    # (0: none waited); None: no worker looked (Store.sample_latency).
    latency: float | None = None


def minute_start(moment: datetime) -> datetime:
    """The start of `moment`'s minute, in UTC."""
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


class MinuteCounts:
    """A worker's counts not yet written: (queue, minute number) -> [succeeded, failed]."""

    def __init__(self, every: float = EVERY) -> None:
        self.every = every
        self.counts: dict[tuple[str, int], list[int]] = {}
        self._next = time.monotonic() + every

    def count(self, queue: str, settled: str) -> None:
        """Count an attempt settled as `settled` (a `Settled` word); only successes and
        failures are counted."""
        if settled == "succeeded":
            index = 0
        elif settled == "failed":
            index = 1
        else:
            return
        key = (queue, int(time.time() // 60))
        pair = self.counts.get(key)
        if pair is None:
            pair = self.counts[key] = [0, 0]
        pair[index] += 1

    def due(self) -> bool:
        """Whether a second has passed since the last write (and there is something)."""
        return bool(self.counts) and time.monotonic() >= self._next

    def take(self) -> list[Minute]:
        """The counts to write, which are then forgotten (see `put_back`)."""
        self._next = time.monotonic() + self.every
        taken = [Minute(queue, datetime.fromtimestamp(number * 60, UTC), s, f)
                 for (queue, number), (s, f) in self.counts.items()]
        self.counts = {}
        return taken

    def put_back(self, minutes: list[Minute]) -> None:
        """Keep counts the store did not take, for the next write."""
        for m in minutes:
            pair = self.counts.setdefault((m.queue, int(m.minute.timestamp() // 60)), [0, 0])
            pair[0] += m.succeeded
            pair[1] += m.failed

