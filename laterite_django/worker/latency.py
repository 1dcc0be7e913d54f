"""When a worker samples its queues' latency (the age of the oldest due waiting job) for
the admin's overview: from its heartbeat thread, at most once per minute of the clock,
never on a job's path. The store keeps the first sample of each queue and minute,
whichever worker takes it (Store.sample_latency)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from ..stores import Store

__all__ = ["LatencySampler"]


class LatencySampler:
    """A worker's once-a-minute latency sample (see the module's docstring)."""

    def __init__(self, queues: Sequence[str]) -> None:
        self.queues = list(queues)
        self._sampled = -1  # the number of the minute last sampled (or tried)

    def due(self) -> bool:
        """Whether this worker has not sampled this minute yet (a clock read, no I/O)."""
        return int(time.time() // 60) != self._sampled

    def sample(self, store: Store) -> bool:
        """Record this minute's latencies unless another worker did; True if this one
        did. The minute counts as tried even if the store fails: the next one tries
        again."""
        number = int(time.time() // 60)
        self._sampled = number
        return store.sample_latency(datetime.fromtimestamp(number * 60, UTC), self.queues)
