"""The Redis store's fair queues seen and kept (a mixin of RedisStore): the waiting jobs
per fair key, counted by the scripts as jobs come and go (`P:queue:<q>:fairn`, see
count_fair in lua/_common.lua: one HINCRBY per push, claim, release or removal), and
the pruning of the turns no key needs any more (lua/prune_fair.lua), a slice of each
queue's turns per script call, so Redis is never held long."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...core.fairness import PRUNE_EVERY, TOP_KEYS, WaitingByKey
from ..errors import guarded
from .values import text

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["FairEntries"]

# Fields of a queue's turns looked at per call of the pruning script.
PRUNE_CHUNK = 1000


class FairEntries:
    """RedisStore's methods for its fair queues (see Store.fair_waiting and tidy)."""

    _fair_pruned_at: float = 0.0  # monotonic time of this store's next pruning

    if TYPE_CHECKING:  # RedisStore's
        @property
        def client(self) -> Redis: ...
        def key(self, *parts: str) -> str: ...
        def queues(self) -> list[str]: ...
        def _run(self, name: str, args: Sequence[Any]) -> Any: ...

    @guarded
    def fair_waiting(self, top: int = TOP_KEYS) -> dict[str, WaitingByKey]:
        names = self.queues()
        pipe = self.client.pipeline(transaction=False)
        for queue in names:
            pipe.hgetall(self.key("queue", queue, "fairn"))
        found = {}
        for queue, counts in zip(names, pipe.execute() if names else [], strict=True):
            waiting = [(text(key), int(n)) for key, n in counts.items() if int(n) > 0]
            if waiting:
                waiting.sort(key=lambda pair: (-pair[1], pair[0]))
                found[queue] = WaitingByKey(top=tuple(waiting[:top]), keys=len(waiting))
        return found

    @guarded
    def prune_fair_turns(self) -> int:
        forgotten = 0
        for queue in self.queues():
            cursor = "0"
            while True:
                cursor, gone = self._run("prune_fair", [queue, cursor, PRUNE_CHUNK])
                cursor = text(cursor)
                forgotten += int(gone)
                if cursor == "0":
                    break
        return forgotten

    def tidy(self) -> int:
        """Prune the fair turns every PRUNE_EVERY seconds (the workers call this every
        few seconds); nothing else piles up on Redis."""
        if time.monotonic() < self._fair_pruned_at:
            return 0
        self._fair_pruned_at = time.monotonic() + PRUNE_EVERY
        return self.prune_fair_turns()
