"""Paused queues, as a worker sees them: the store's set, read at most every POLL seconds.

A worker leaves the paused queues out of its claim, so a pause reaches every
worker on every host within LATERITE_QUEUE_POLL seconds (plus the job in hand).
While one of its queues is paused an idle worker waits at most that long, so a
resume is seen as soon; a resume also wakes the waiting workers (a notification
on PostgreSQL, the queue's wake-up list on Redis).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..stores import Store

__all__ = ["PausedView"]


class PausedView:
    """The paused queues of `store`, read again once `every` seconds have passed."""

    def __init__(self, store: Store, *, every: float) -> None:
        self.store = store
        self.every = every
        self._paused: frozenset[str] = frozenset()
        self._read_at: float | None = None

    def active(self, queues: Sequence[str]) -> list[str]:
        """`queues` without the paused ones, in their order."""
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= self.every:
            self._paused = frozenset(self.store.paused_queues())
            self._read_at = now
        if not self._paused:
            return list(queues)
        return [queue for queue in queues if queue not in self._paused]

    def known(self, queues: Sequence[str]) -> bool:
        """Whether one of `queues` was paused when the set was last read (no read)."""
        return any(queue in self._paused for queue in queues)

    def expire(self) -> None:
        """Read the set again at the next `active()`."""
        self._read_at = None
