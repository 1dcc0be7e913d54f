"""What a worker does with the jobs it holds besides running them: delete the finished
ones in bulk, give back the ones not started, count what ended, and sweep the
claims of workers that stopped beating (a mixin of Worker)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from django.utils import timezone

from ..core.crash_points import crash_point
from ..core.rules import lost_reason
from ..core.values import Claim
from ..stores import Store

if TYPE_CHECKING:
    from ..core.minutes import MinuteCounts
    from .hand import Hand
    from .reports import Monitor
    from .settle import Settler
    from .tally import Tally

__all__ = ["HeldJobs"]

logger = logging.getLogger("laterite")


class HeldJobs:
    """Worker's methods for the jobs in its hand (settling many, giving back, sweeping)."""

    store: Store
    hand: Hand
    settler: Settler
    monitor: Monitor
    minutes: MinuteCounts
    tally: Tally | None
    retry_after: float
    _next_sweep: float

    def _flush(self) -> None:
        """Delete the finished jobs now."""
        finished = self.hand.take_finished()
        if not finished:
            return
        crash_point("delete.before")
        try:
            deleted = self.settler.patiently(lambda: self.store.delete(finished))
        except BaseException:
            self.hand.put_back_finished(finished)
            raise
        crash_point("delete.after")
        if deleted < len(finished):
            lost = len(finished) - deleted
            logger.warning("%d finished job%s lost %s; not settled again", lost,
                           "" if lost == 1 else "s", "its claim" if lost == 1 else "their claims",
                           extra={"action": "claim_lost"})
        self._deleted(finished)

    def _deleted(self, finished: list[Claim]) -> None:
        for claim in finished:
            self.monitor.done(claim)

    def ended(self, claim: Claim, settled: str, duration: float) -> None:
        """An attempt was settled as `settled` (a `Settled` word): count it."""
        self.minutes.count(claim.queue, settled)
        if self.tally is not None:
            self.tally.ended(claim, settled, duration)

    def _write_minutes(self) -> None:
        """Add the per-minute counts to the store; kept for the next try if it fails."""
        taken = self.minutes.take()
        if not taken:
            return
        try:
            self.store.add_minutes(taken)
        except Exception as e:
            self.minutes.put_back(taken)
            logger.warning("Could not write the overview's counts: %s", e,
                           extra={"action": "minutes_failed"})

    def job_raised(self, claim: Claim, error: BaseException) -> None:
        """A job raised `error`; its attempt is settled. (testing.run_jobs stops here.)"""

    def give_back(self, claim: Claim, *, started: bool = True) -> bool:
        """Return `claim` to its queue where it was in line (due when it was, before
        the jobs pushed since: the oldest due job is claimed first), not charged a
        try (not `started`: its attempt taken back); False if the claim was no longer
        this worker's. (Also used from another thread: the `worker` mode's shutdown
        gives back the job of a thread stuck in C.)"""
        due = timezone.now()
        if claim.available_at is not None and claim.available_at < due:
            due = claim.available_at
        try:
            return self.store.release(claim, due, claim.last_error,
                                      uncharged=True, started=started)
        finally:
            self.monitor.done(claim)

    def _give_back(self, claims: list[Claim]) -> None:
        """Return claims not started to their queues, their attempts taken back."""
        for claim in claims:
            try:
                self.give_back(claim, started=False)
            except Exception:
                logger.exception("Could not return job %s to its queue", claim.id)

    def _relieve(self) -> None:
        """A job runs long: delete the finished jobs, give back those not started.

        Called by the heartbeat thread, on its own connection.
        """
        self._flush()
        with self.hand.giving_back() as unstarted:
            self._give_back(unstarted)

    def _sweep_every(self) -> float:
        """Seconds between two sweeps of a worker that is not quiet."""
        return min(5.0, self.retry_after / 3)

    def _sweep(self) -> None:
        """Every few seconds, return the claims of workers that stopped beating, and let
        the store tidy itself (vacuum the dead rows of its table, on PostgreSQL).

        This worker's own finished jobs are deleted first: after an outage longer
        than retry_after, they would otherwise be taken for abandoned and run again.
        """
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_every()
        self._flush()
        self.store.tidy()
        # Counted by the store's clock, which dated the claims: not this host's.
        count = self.store.requeue_abandoned(self.retry_after, lost_reason(self.retry_after))
        if count:
            logger.warning("Returned %d abandoned job%s to %s", count,
                           "" if count == 1 else "s", "its queue" if count == 1 else "their queues",
                           extra={"action": "requeued_abandoned", "count": count})
