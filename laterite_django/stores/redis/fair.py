"""The Redis store's fair queues seen and kept (`FairEntries`, owned by RedisStore): the
waiting jobs per fair key, counted by the scripts as jobs come and go
(`P:queue:<q>:fairn`, see count_fair in lua/_common.lua: one HINCRBY per push, claim,
release or removal), and the pruning of the turns no key needs any more
(lua/prune_fair.lua), a slice of each queue's turns per script call, so Redis is never
held long."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...core.fairness import PRUNE_EVERY, WaitingByKey
from .values import text

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["FairEntries"]

# Fields of a queue's turns looked at per call of the pruning script.
PRUNE_CHUNK = 1000


class FairEntries:
    """A Redis store's fair queues: the waiting jobs per key (Store.fair_waiting) and the
    pruning of the turns no key needs (Store.prune_fair_turns, and at tidy)."""

    def __init__(self, prefix: str, client: Callable[[], Redis],
                 queues: Callable[[], list[str]],
                 run: Callable[[str, Sequence[Any]], Any]) -> None:
        self.prefix = prefix
        self._client = client  # the store's client, connected on first use
        self._queues = queues  # the store's queues
        self._run = run  # runs a script (lua/<name>.lua) with the prefix
        self.pruned_at = 0.0  # monotonic time of the next pruning by `prune_now`

    def waiting(self, top: int) -> dict[str, WaitingByKey]:
        """The `top` keys with the most waiting jobs, per queue that has some."""
        names = self._queues()
        pipe = self._client().pipeline(transaction=False)
        for queue in names:
            pipe.hgetall(f"{self.prefix}:queue:{queue}:fairn")
        found = {}
        for queue, counts in zip(names, pipe.execute() if names else [], strict=True):
            waiting = [(text(key), int(n)) for key, n in counts.items() if int(n) > 0]
            if waiting:
                waiting.sort(key=lambda pair: (-pair[1], pair[0]))
                found[queue] = WaitingByKey(top=tuple(waiting[:top]), keys=len(waiting))
        return found

    def prune(self) -> int:
        """Forget the turns no key needs, PRUNE_CHUNK fields per script call; how many."""
        forgotten = 0
        for queue in self._queues():
            cursor = "0"
            while True:
                cursor, gone = self._run("prune_fair", [queue, cursor, PRUNE_CHUNK])
                cursor = text(cursor)
                forgotten += int(gone)
                if cursor == "0":
                    break
        return forgotten

    def prune_now(self) -> int:
        """Prune the turns every PRUNE_EVERY seconds (the workers' tidy calls this every
        few seconds); nothing else piles up on Redis."""
        if time.monotonic() < self.pruned_at:
            return 0
        self.pruned_at = time.monotonic() + PRUNE_EVERY
        return self.prune()
