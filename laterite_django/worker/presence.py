"""This process's entry in the live workers' list (core.workers): written as its worker
starts, again with each heartbeat, removed as it stops cleanly.

One entry per process: a `queue_work` process runs one Worker (concurrency 1), the
`worker` mode's thread pool one Worker per thread, all in one entry (concurrency:
its threads). Each Worker's heartbeat thread calls `beat`; the entry is written at
most once per `every` seconds however many threads beat, so the list costs one
write per RETRY_AFTER / 3 seconds per process, never one per job.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Sequence

from django.utils import timezone

from .. import __version__
from ..core.workers import ID_MAX, WorkerInfo
from ..exceptions import StoreUnavailable
from ..stores import Store
from .hand import Hand

__all__ = ["Presence", "process_id"]

logger = logging.getLogger("laterite")


def process_id() -> str:
    """This process's id in the live workers' list: "<host>:<pid>"."""
    return f"{socket.gethostname()}:{os.getpid()}"[-ID_MAX:]


class Presence:
    """The entry of the process whose Workers `join` it (see the module's docstring)."""

    def __init__(self, name: str, queues: Sequence[str], *, concurrency: int = 1,
                 every: float) -> None:
        self.info = WorkerInfo(
            id=process_id(), name=name[:ID_MAX], host=socket.gethostname()[:ID_MAX],
            pid=os.getpid(), version=__version__, queues=list(queues),
            concurrency=concurrency, started_at=timezone.now())
        self.every = every
        self._hands: list[Hand] = []
        self._lock = threading.Lock()
        self._written_at = float("-inf")  # monotonic

    def join(self, store: Store, hand: Hand) -> None:
        """A Worker of this process starts: list the process now (not at its first beat)."""
        with self._lock:
            self._hands.append(hand)
        self.beat(store, now=True)

    def beat(self, store: Store, *, now: bool = False) -> None:
        """Write the entry with the jobs in hand, unless written less than `every` ago."""
        with self._lock:
            if not now and time.monotonic() - self._written_at < self.every * 0.9:
                return
            self._written_at = time.monotonic()
            self.info.jobs = [job_id for hand in self._hands for job_id in hand.job_ids()]
        try:
            store.beat_worker(self.info)
        except StoreUnavailable as e:
            logger.warning("Could not list this worker: %s", e,
                           extra={"action": "worker_beat_failed"})
        except Exception:
            logger.exception("Could not list this worker", extra={"action": "worker_beat_failed"})

    def leave(self, store: Store, hand: Hand) -> None:
        """A Worker stops cleanly; the last one to stop removes the entry."""
        with self._lock:
            if hand in self._hands:
                self._hands.remove(hand)
            last = not self._hands
        if not last:
            return
        try:
            store.remove_worker(self.info.id)
        except Exception as e:
            logger.warning("Could not take this worker off the list (it will be shown "
                           "lost): %s", e, extra={"action": "worker_leave_failed"})
