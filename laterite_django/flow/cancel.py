"""Cancelling a job: how a running one learns of it (the words of its outcome:
core/cancel.py).

A waiting or delayed job is moved to the failed list by the store at once. A
running one is marked in the store; the worker's heartbeat thread looks for that
mark about once a second while a job runs (`Lookout`), sets the job's
`cx.cancelled`, and if the job is still running `GRACE` seconds later,
interrupts it with `Cancelled` as a timeout would (`execute.interrupt`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.values import Claim
    from ..stores import Store

__all__ = ["GRACE", "LOOK_EVERY", "CancelWatch", "Lookout"]

# Seconds a running job has, once told, to stop by itself before it is interrupted.
GRACE = 3.0
# How often the heartbeat asks the store about the running job (and how long a job
# runs before it is first asked about: shorter jobs are never asked).
LOOK_EVERY = 1.0
class CancelWatch:
    """One running job's cancel state, shared by the worker's thread and its heartbeat."""

    def __init__(self) -> None:
        self.thread_id = threading.get_ident()
        self.asked_at: float | None = None  # when the heartbeat told it (monotonic)
        self.interrupt = False  # set when the grace ran out: execute raises Cancelled
        self.running = True

    @property
    def asked(self) -> bool:
        """Whether the job was told it is cancelled (a plain attribute read, as a job
        may look often; one job per watch, so no thread waits on it)."""
        return self.asked_at is not None

    def ask(self) -> None:
        if self.asked_at is None:
            self.asked_at = time.monotonic()

    def overdue(self) -> bool:
        """Whether the job was told and is past its grace."""
        return self.asked_at is not None and time.monotonic() - self.asked_at >= GRACE


class Lookout:
    """The heartbeat's look for cancels of the running job (see the module docstring)."""

    def __init__(self, store: Store, on_ask: Callable[[Claim], None] | None = None, *,
                 interrupt: Callable[[CancelWatch], None]) -> None:
        self.store = store
        # Raises Cancelled in a job past its grace: the worker's (worker.execute.interrupt).
        self.interrupt = interrupt
        # Told of each job found cancelled (the supervisor, through the worker's pipe:
        # it kills a worker whose job never returns to Python, past the grace).
        self.on_ask = on_ask
        # (claim, watch, started) of the running job, or None: set by the worker's thread.
        self.current: tuple[Claim, CancelWatch, float] | None = None
        self._next = 0.0

    def due_in(self) -> float | None:
        """Seconds until the next look, or None while no job runs."""
        current = self.current
        if current is None:
            return None
        started = current[2]
        first = started + LOOK_EVERY
        return max(0.0, max(first, self._next) - time.monotonic())

    def look(self) -> None:
        """Ask the store about the running job; tell it, or interrupt it, as due."""
        current = self.current
        if current is None:
            return
        claim, watch, started = current
        now = time.monotonic()
        if now - started < LOOK_EVERY or now < self._next:
            return
        self._next = now + LOOK_EVERY
        if not watch.asked and claim.id in self.store.cancel_requested([claim]):
            watch.ask()
            if self.on_ask is not None:
                self.on_ask(claim)
        if watch.overdue() and watch.running and self.current is current:
            self.interrupt(watch)
