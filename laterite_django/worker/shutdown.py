"""SIGTERM/SIGINT for a worker: the first stops claiming, the second stops now."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["stop_signals"]

logger = logging.getLogger("laterite")

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_signals(graceful: Callable[[], None], immediate: Callable[[], None]) -> Iterator[None]:
    """Call `graceful` on the first SIGTERM/SIGINT and `immediate` on the next.

    Restores the previous handlers on exit; does nothing off the main thread,
    where Python cannot install signal handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handle(signum: int, frame: object) -> None:
        received.append(signum)
        name = signal.Signals(signum).name
        if len(received) == 1:
            logger.info("%s received: finishing the jobs in hand, then stopping", name,
                        extra={"action": "stop_requested", "signal": name})
            graceful()
        else:
            logger.warning("%s received again: stopping now, jobs back to their queues", name,
                           extra={"action": "stop_now", "signal": name})
            immediate()

    previous = {sig: signal.signal(sig, handle) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
