"""Stop signals for a worker: the first finishes the jobs in hand, the next stops now.

SIGTERM and SIGINT count: the first asks the worker to finish its jobs and
claim no more, the second stops the running job and returns it to its queue.
A supervisor speaks to its workers with two signals of its own that do not
count, so a worker that also got the operator's signal directly (Ctrl-C in a
terminal, systemd signalling every process of the service) is not pushed from
"finish" to "stop now" by its supervisor passing the same word on.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["FINISH", "SIGNALS", "STOP_NOW", "EarlyStops", "early_stops", "stop_signals"]

logger = logging.getLogger("laterite")

SIGNALS = (signal.SIGTERM, signal.SIGINT)
# From a supervisor: finish the jobs in hand, claim no more.
FINISH = signal.SIGUSR1
# From a supervisor, a dead supervisor (the parent-death signal) or the end of
# the grace period: stop the running job now, jobs back to their queues.
STOP_NOW = signal.SIGUSR2


def said(signum: int) -> str:
    """How a worker's log names a stop signal: the supervisor's own two by what they
    mean, since the operator sent SIGTERM or SIGINT, never SIGUSR1 or SIGUSR2."""
    if signum == FINISH:
        return "A stop from the supervisor"
    if signum == STOP_NOW:
        return "A stop-now (from the supervisor or the grace period's end)"
    return signal.Signals(signum).name


@contextmanager
def stop_signals(
    graceful: Callable[[], None],
    immediate: Callable[[], None],
    *,
    grace: float | None = None,
) -> Iterator[None]:
    """Call `graceful` on the first stop signal and `immediate` on the next.

    With `grace`, `immediate` also runs `grace` seconds after the first.
    Restores the previous handlers on exit; does nothing off the main thread,
    where Python cannot install signal handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stage = [0]  # 0 running, 1 finishing the jobs in hand, 2 stopped now
    timers: list[threading.Timer] = []
    main = threading.main_thread().ident

    def finish(signum: int) -> None:
        stage[0] = 1
        logger.info("%s received: finishing the jobs in hand, then stopping", said(signum),
                    extra={"action": "stop_requested", "signal": signal.Signals(signum).name})
        if grace is not None:
            timer = threading.Timer(grace, signal.pthread_kill, (main, STOP_NOW))
            timer.daemon = True
            timer.start()
            timers.append(timer)
        graceful()

    def stop_now(signum: int) -> None:
        stage[0] = 2
        logger.warning("%s received: stopping now, jobs back to their queues", said(signum),
                       extra={"action": "stop_now", "signal": signal.Signals(signum).name})
        immediate()

    def handle(signum: int, frame: object) -> None:
        if stage[0] == 2:
            return  # already stopping now: never interrupt the jobs' return
        if signum == STOP_NOW or (signum in SIGNALS and stage[0] == 1):
            stop_now(signum)
        elif stage[0] == 0:
            finish(signum)

    handled = (*SIGNALS, FINISH, STOP_NOW)
    previous = {sig: signal.signal(sig, handle) for sig in handled}
    try:
        yield
    finally:
        for timer in timers:
            timer.cancel()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class EarlyStops:
    """The stop signals that came before a worker's or supervisor's own handlers were in
    place (its metrics served, its store checked, its schedules read): recorded, then
    replayed to those handlers, so that none kills the command or is lost."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def record(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)

    def replay(self) -> None:
        """Send each recorded signal again, in order, to the handlers now in place."""
        while self.received:
            signal.raise_signal(self.received.pop(0))


@contextmanager
def early_stops() -> Iterator[EarlyStops]:
    """Record SIGTERM and SIGINT until the handlers of the work take over (see
    EarlyStops); the previous handlers are back on exit. Off the main thread, where
    Python cannot install handlers, nothing is recorded."""
    early = EarlyStops()
    if threading.current_thread() is not threading.main_thread():
        yield early
        return
    previous = {sig: signal.signal(sig, early.record) for sig in SIGNALS}
    try:
        yield early
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
