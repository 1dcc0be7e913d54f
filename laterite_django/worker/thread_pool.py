"""The worker threads of one process: each runs a Worker; a watcher replaces any that dies.

A shutdown tells every Worker to finish its job and claim no more, waits out
the grace, then stops the jobs still running (at their next bytecode, as a
timeout does); a thread whose job is stuck in C code has its claims returned
for it. Either way those jobs go back to their queues, not counted as an
attempt.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from django.db import connections

from ..conf import settings
from ..core.values import Claim
from ..schedules.scheduler import SchedulerThread
from .loop import Worker, WorkerStopped, default_worker_name
from .presence import Presence
from .reports import Monitor

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["ThreadPool"]

logger = logging.getLogger("laterite")

# How often the watcher looks at the threads when none told it that it ended.
WATCH_EVERY = 1.0
# A thread that ends sooner than this after its start died young: it is started
# again at once, but after the second young death in a row 1 s later, then 2, 4 ...
# up to RESTART_PAUSE_MAX seconds.
QUICK_DEATH = 30.0
RESTART_PAUSE_MAX = 30.0
# After the grace, how long threads get to hand their jobs back themselves.
STOP_NOW_WAIT = 1.0


class _InHand(Monitor):
    """The claims a worker thread holds and has not settled, so a shutdown can return
    them for a thread that does not stop (its job stuck in C code)."""

    def __init__(self) -> None:
        self._claims: dict[tuple[object, str], Claim] = {}
        self._lock = threading.Lock()

    def hold(self, claims: Sequence[Claim]) -> None:
        with self._lock:
            for claim in claims:
                self._claims[(claim.id, claim.token)] = claim

    def succeeded(self, claim: Claim) -> None:
        self.done(claim)  # ran to its end: deleted by the worker, never returned

    def done(self, claim: Claim) -> None:
        with self._lock:
            self._claims.pop((claim.id, claim.token), None)

    def claims(self) -> list[Claim]:
        with self._lock:
            return list(self._claims.values())


class _Slot:
    """One worker thread, and the Worker it runs; the watcher replaces both if it dies."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.name = f"laterite-worker-{index}"
        self.worker: Worker | None = None
        self.in_hand = _InHand()
        self.thread: threading.Thread | None = None
        self.started_at = 0.0
        self.ended = ""  # why its last thread ended, when nobody asked it to
        self.quick_deaths = 0
        self.restart_at = 0.0


class ThreadPool:
    """This process's worker threads, their watcher, and their shutdown."""

    def __init__(self, count: int, grace: float) -> None:
        self.pid = os.getpid()
        self.grace = grace
        self.slots = [_Slot(index) for index in range(count)]
        self.closing = threading.Event()
        self.done = threading.Event()
        self.deadline = 0.0
        self._lock = threading.RLock()  # RLock: a signal handler may take it in its thread
        self._finishing = threading.Lock()
        self._wake = threading.Event()
        self._watcher: threading.Thread | None = None
        self.scheduler: SchedulerThread | None = None
        # One entry in the live workers' list for the process, written by every thread.
        self.presence = Presence(default_worker_name(), list(settings.QUEUES),
                                 concurrency=count,
                                 every=max(0.2, float(settings.RETRY_AFTER) / 3))

    def start(self) -> None:
        with self._lock:
            # The recurring schedules fire from this process too (a bad one raises here).
            self.scheduler = SchedulerThread().start()
            for slot in self.slots:
                self._spawn(slot)
            self._watcher = threading.Thread(target=self._watch, name="laterite-watcher",
                                             daemon=True)
            self._watcher.start()

    def _spawn(self, slot: _Slot) -> None:
        slot.in_hand = _InHand()
        slot.worker = Worker(
            list(settings.QUEUES),
            name=f"{default_worker_name()}-thread-{slot.index}",
            monitor=slot.in_hand,
            presence=self.presence,
        )
        slot.ended = ""
        slot.started_at = time.monotonic()
        slot.thread = threading.Thread(target=self._work, args=(slot, slot.worker),
                                       name=slot.name, daemon=True)
        slot.thread.start()

    def _work(self, slot: _Slot, worker: Worker) -> None:
        try:
            worker.run()
            if not worker.stopping.is_set():
                slot.ended = f"Worker.run() returned ({worker.stop_reason or 'no reason'})"
        except BaseException as e:  # the thread must end with a word said, whatever it was
            slot.ended = f"{type(e).__name__}: {e}".rstrip(": ")
            logger.exception("Worker thread %s crashed", slot.name,
                             extra={"action": "worker_crashed", "worker_thread": slot.name})
        finally:
            connections.close_all()
            self._wake.set()

    # -- the watcher ------------------------------------------------------------------

    def _watch(self) -> None:
        while not self.closing.is_set():
            self._wake.wait(WATCH_EVERY)
            self._wake.clear()
            try:
                self._restart_dead()
            except Exception:
                logger.exception("The worker threads' watcher failed; it goes on")

    def _restart_dead(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            with self._lock:
                if self.closing.is_set():
                    return
                if slot.thread is None or slot.thread.is_alive():
                    continue
                if slot.restart_at == 0.0:
                    lived = now - slot.started_at
                    slot.quick_deaths = slot.quick_deaths + 1 if lived < QUICK_DEATH else 0
                    pause = (0.0 if slot.quick_deaths <= 1 else
                             min(RESTART_PAUSE_MAX, 2.0 ** (slot.quick_deaths - 2)))
                    slot.restart_at = now + pause
                    logger.warning(
                        "Worker thread %s stopped (%s); starting a new one%s",
                        slot.name, slot.ended or "no reason given",
                        f" in {pause:g} s" if pause else "",
                        extra={"action": "worker_restarted", "worker_thread": slot.name,
                               "reason": slot.ended},
                    )
                if now >= slot.restart_at:
                    slot.restart_at = 0.0
                    self._spawn(slot)

    # -- shutdown ---------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Tell every thread to finish its job and claim no more; start the grace."""
        with self._lock:
            if self.closing.is_set():
                return
            self.deadline = time.monotonic() + self.grace
            self.closing.set()
            if self.scheduler is not None:
                self.scheduler.stop(wait=0)
            for slot in self.slots:
                if slot.worker is not None:
                    slot.worker.stop()
        self._wake.set()

    def finish_shutdown(self) -> None:
        """Wait out the grace, stop the threads still in a job, return what they hold."""
        with self._finishing:  # one runs it; the others wait for its end
            if self.done.is_set():
                return
            try:
                self._finish()
            finally:
                self.done.set()

    def _finish(self) -> None:
        live = [slot for slot in self.slots if slot.thread is not None]
        for slot in live:
            slot.thread.join(max(0.0, self.deadline - time.monotonic()))  # type: ignore[union-attr]
        late = [slot for slot in live if slot.thread.is_alive()]  # type: ignore[union-attr]
        for slot in late:
            _stop_now(slot, self.grace)
        until = time.monotonic() + STOP_NOW_WAIT
        for slot in late:
            slot.thread.join(max(0.0, until - time.monotonic()))  # type: ignore[union-attr]
        for slot in late:
            if slot.thread.is_alive():  # type: ignore[union-attr]
                _return_for(slot)
        if self._watcher is not None:
            self._watcher.join(WATCH_EVERY)
        if self.scheduler is not None:
            self.scheduler.stop()  # its round ends within a second


def _stop_now(slot: _Slot, grace: float) -> None:
    """Stop the thread's running job now: its worker gives it back, not counted."""
    worker, thread = slot.worker, slot.thread
    if worker is None or thread is None or thread.ident is None:
        return
    try:
        worker.stop_now()  # between jobs: the worker returns its claims and stops
    except WorkerStopped:
        # stop_now() raises in its caller while a job runs; that job runs in the worker's
        # thread, so raise it there, as a timeout does.
        logger.warning(
            "Worker thread %s still runs a job after the %g s shutdown grace: stopping it "
            "now; the job goes back to its queue", slot.name, grace,
            extra={"action": "stop_now", "worker_thread": slot.name},
        )
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(WorkerStopped)
        )


def _return_for(slot: _Slot) -> None:
    """Give back the claims of a thread that did not stop (its job is in C code).

    If the job ends later, its worker finds its claim gone and settles nothing.
    """
    worker = slot.worker
    if worker is None:
        return
    returned = 0
    for claim in slot.in_hand.claims():
        try:
            returned += bool(worker.give_back(claim))  # False: the worker returned it itself
        except Exception:
            logger.exception("Could not return job %s to its queue at shutdown; it returns "
                             "once its claim expires", claim.id)
    if returned:
        logger.warning(
            "Worker thread %s did not stop (a job in C code?); returned %d jobs to their "
            "queues for it", slot.name, returned,
            extra={"action": "returned_at_shutdown", "worker_thread": slot.name,
                   "count": returned},
        )
