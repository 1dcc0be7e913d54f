"""A worker's store outage, said once when it starts and once when it ends; and the
unexpected error that breaks one round of its loop.

While the store is away the worker waits with growing pauses; repeating the
same warning at each one would bury everything else in the log.
"""

from __future__ import annotations

import logging
import threading
import time

from ..exceptions import StoreUnavailable

__all__ = ["Outage"]

logger = logging.getLogger("laterite")


class Outage:
    """Whether the store is down for one worker, and the lines that say so."""

    def __init__(self, worker: str, stopping: threading.Event) -> None:
        self.worker = worker
        self.stopping = stopping
        self.since: float | None = None

    def down(self, error: StoreUnavailable, wait: float) -> None:
        """Say once that the store is down (then only at debug level), and wait."""
        extra = {"action": "store_unavailable", "worker": self.worker}
        if self.since is None:
            self.since = time.monotonic()
            logger.error("Store unavailable: %s; waiting for it to come back",
                         str(error).rstrip(". "), extra=extra)
        else:
            logger.debug("Store still unavailable (%s); retrying in %.1f s", error, wait,
                         extra=extra)
        self.stopping.wait(wait)

    def worker_error(self, error: BaseException, wait: float) -> None:
        """Something unexpected broke a round of the loop: say it with its traceback, wait."""
        logger.warning("Worker error (%r); retrying in %.1f s", error, wait, exc_info=error,
                       extra={"action": "worker_error", "worker": self.worker})
        self.stopping.wait(wait)

    def back(self) -> None:
        """The store answered: say so if it had been away."""
        if self.since is not None:
            logger.info("Store available again after %.1f s", time.monotonic() - self.since,
                        extra={"action": "store_back", "worker": self.worker})
            self.since = None


