"""How a worker with nothing to do waits: for a push, the next sweep or a delayed job,
and, where its store says nothing can have changed, without a sweep or a claim (a
mixin of Worker)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from django.utils import timezone

from ..core.values import Claim
from ..flow.limits import any_job_limited, limits_of, queue_limits
from ..flow.pause import PausedView
from ..stores import Store
from ..stores.base import QUIET_LONGEST
from .hand import Hand
from .reports import Monitor

__all__ = ["IDLE_WAIT", "IdleWaiting"]

# The longest an idle worker waits for a wake-up (on stores that send them) before it
# looks for due jobs and sweeps again.
IDLE_WAIT = 30.0


class IdleWaiting:
    """Worker's methods for its idle waits."""

    store: Store
    hand: Hand
    monitor: Monitor
    paused: PausedView
    queues: list[str]
    name: str
    sleep: float
    stopping: threading.Event
    retry_after: float
    max_seconds: float | None
    stop_when_empty: bool
    once: bool
    wait_delayed: float
    _started: float

    if TYPE_CHECKING:  # the worker's own
        def _claim_limit(self) -> int: ...
        def _limit_reached(self) -> bool: ...
        def _give_back(self, claims: list[Claim]) -> None: ...
        def _sweep_every(self) -> float: ...

    def _quiet(self) -> bool:
        """Whether this round may skip its sweep and claim (Store.quiet): never for a
        worker that stops when empty or after one job, nor while it holds finished
        jobs or one of its queues is paused (it then polls for the resume). The store
        is asked first: it says False at once for a busy worker, every round."""
        return (self.store.quiet() and not self.stop_when_empty and not self.once
                and not self.hand.held() and not self.paused.known(self.queues))

    def _wait_for_work(self) -> list[Claim]:
        """Wait idle for a push (or the next sweep, or a delayed job); return what the
        store claimed as it woke, if anything."""
        # A claim made as the wait ends may be dated a little earlier: keep that
        # well inside retry_after, or another worker's sweep could take the job
        # for abandoned before this worker's first heartbeat.
        claims = self.store.wait_and_claim(
            self.queues, self.name, self._claim_limit(), self.sleep, self.stopping,
            fresh_within=self.retry_after / 10, longest=self._idle_wait(),
            quiet_after=self._sweep_every(), limits=limits_of(self.queues))
        self.paused.expire()  # woken (a resume wakes too): read them again
        if claims and (self.stopping.is_set() or self._limit_reached()):
            # Claimed as the stop came: return them unstarted, no attempt counted.
            self.monitor.hold(claims)
            self._give_back(claims)
            return []
        return claims

    def _idle_wait(self) -> float:
        """How long an idle worker waits on a store that wakes it: until the next
        sweep would be due, so jobs of a dead worker come back in good time (a quiet
        worker sweeps nothing: until its store ends the spell), and no longer than
        its --max-seconds leave. Where a limit may apply to its claims,
        only `sleep` (LATERITE_QUEUE_POLL): a job held back by a rate or concurrency
        limit becomes claimable as time passes or a running job ends, which wakes
        no one."""
        if queue_limits(self.queues) or any_job_limited():
            wait = self.sleep
        elif self.store.quiet():
            wait = QUIET_LONGEST  # or less: the store ends a quiet spell when it must
        else:
            wait = max(self.sleep, min(IDLE_WAIT, self.retry_after / 3))
        if self.max_seconds is not None:
            left = self.max_seconds - (time.monotonic() - self._started)
            wait = min(wait, max(left, 0.0))
        return wait

    def _wait_for_delayed(self) -> bool:
        """Nothing is due: wait for the next delayed job if it is due within
        `wait_delayed` seconds, and say so (False: nothing to wait for)."""
        if not self.wait_delayed:
            return False
        due = self.store.next_due(self.queues)
        if due is None:
            return False
        wait = (due - timezone.now()).total_seconds()
        if wait > self.wait_delayed:
            return False
        # A job pushed meanwhile is seen after `sleep` seconds at the latest.
        self.stopping.wait(min(max(wait, 0.01), self.sleep))
        return True
