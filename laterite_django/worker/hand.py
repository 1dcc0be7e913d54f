"""The jobs a worker holds: the batch not yet started, the one running, the finished.

A claim takes up to N due jobs at once, run one after another; jobs that
succeeded are deleted with the next claim (one round trip for both), or in
groups of SETTLE_EVERY (worker/loop.py) while the rest of a larger batch waits. The
worker's main thread and its heartbeat thread share this hand: the heartbeat
keeps every held claim fresh and, once a job has run longer than a moment,
deletes the finished jobs and gives back the ones not started, so neither waits
behind a slow job (a crash then neither runs a finished job again nor charges
an attempt to one that never started).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator

from ..core.values import Claim

__all__ = ["Hand"]


class Hand:
    """Claims in hand, safe to share between the worker's thread and its heartbeat."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unstarted: deque[Claim] = deque()
        self._running: Claim | None = None
        self._running_since = 0.0
        self._finished: list[Claim] = []
        self._finished_since = 0.0
        self.changed = threading.Event()  # wakes the heartbeat when a batch arrives
        self._returning = threading.Lock()  # held while the heartbeat gives claims back

    def take(self, claims: list[Claim]) -> None:
        """A new batch, to run in this order."""
        with self._lock:
            self._unstarted.extend(claims)
        if len(claims) > 1:
            self.changed.set()  # the heartbeat starts looking at the batch

    def next(self) -> Claim | None:
        """The next claim to run, now counted as running; None when none is left."""
        with self._lock:
            if not self._unstarted:
                return None
            claim = self._running = self._unstarted.popleft()
            self._running_since = time.monotonic()
        claim.started = time.time()  # for its history record
        return claim

    def succeeded(self, claim: Claim) -> None:
        """The running job succeeded: delete it soon."""
        claim.ended = time.time()  # for its history record
        with self._lock:
            if self._running is claim:
                self._running = None
            if not self._finished:
                self._finished_since = time.monotonic()
            self._finished.append(claim)

    def settled(self, claim: Claim) -> None:
        """The job is settled (released, failed, returned): no longer held."""
        with self._lock:
            if self._running is claim:
                self._running = None

    def take_finished(self) -> list[Claim]:
        """Hand over the finished jobs, to be deleted by the caller."""
        with self._lock:
            finished, self._finished = self._finished, []
            return finished

    def put_back_finished(self, claims: list[Claim]) -> None:
        """The deletion failed (store down): keep them, to delete later."""
        with self._lock:
            self._finished[:0] = claims

    def take_unstarted(self) -> list[Claim]:
        """Hand over the claims not started, to be given back by the caller."""
        with self._lock:
            unstarted = list(self._unstarted)
            self._unstarted.clear()
            return unstarted

    @contextlib.contextmanager
    def giving_back(self) -> Iterator[list[Claim]]:
        """Take the claims not started, for the caller to give back within this block
        (the heartbeat, relieving a slow job); `wait_given_back` waits for its end."""
        with self._returning:
            yield self.take_unstarted()

    def wait_given_back(self) -> None:
        """Wait until claims given back from another thread (`giving_back`) are back in
        the store. A claim made before would not see them: the worker could find its
        queues empty and, with --stop-when-empty, exit and leave them waiting."""
        with self._returning:
            pass

    def settle_due(self, every: int) -> bool:
        """Whether `every` jobs have finished while others wait to start: delete them
        now rather than with the next claim."""
        with self._lock:
            return len(self._finished) >= every and bool(self._unstarted)

    def finished_for(self) -> float:
        """Seconds the oldest finished job has waited for deletion (0 if none)."""
        with self._lock:
            return time.monotonic() - self._finished_since if self._finished else 0.0

    def slow_job(self, after: float) -> bool:
        """Whether a job has run longer than `after` while others wait in hand."""
        with self._lock:
            return (
                self._running is not None
                and bool(self._finished or self._unstarted)
                and time.monotonic() - self._running_since > after
            )

    def busy(self) -> bool:
        """Whether a job runs with others waiting in hand (the heartbeat then looks often)."""
        with self._lock:
            return self._running is not None and bool(self._finished or self._unstarted)

    def held(self) -> list[Claim]:
        """Every claim this worker still holds, for its heartbeat."""
        with self._lock:
            held = [*self._unstarted, *self._finished]
            if self._running is not None:
                held.append(self._running)
            return held

    def job_ids(self) -> list[int]:
        """The ids of the jobs in hand not finished: the running one first, then the rest
        of its batch (the live workers' list)."""
        with self._lock:
            running = [] if self._running is None else [self._running]
            return [int(claim.id) for claim in (*running, *self._unstarted)]

    def clear(self) -> None:
        """Forget every claim (the store is down: they expire and come back)."""
        with self._lock:
            self._unstarted.clear()
            self._running = None
