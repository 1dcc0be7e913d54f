"""Carry out the rule book's decisions on a store, and tell the signals.

Used by the worker for its own jobs and by the process supervisor for the jobs
of a worker that can no longer settle them. Nothing here decides: see `rules`.
A signal receiver that raises is logged and never changes a job's fate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.dispatch import Signal

from ..core.backoff import Growing
from ..core.crash_points import crash_point
from ..core.rules import Action, Decision
from ..core.sizes import storable
from ..core.values import Claim
from ..exceptions import StoreUnavailable
from ..registry import registry
from ..signals import job_failed, job_retrying
from ..stores import Store

__all__ = ["Settled", "Settler", "notify"]

logger = logging.getLogger("laterite")

T = TypeVar("T")

# A job given back is due at the store's now, by the store's clock (Store.release).
_NOW = timedelta(0)


class Settled:
    """What became of a job once settled (the values are the log's words)."""

    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    FAILED = "failed"
    RETURNED = "returned"
    SNOOZED = "snoozed"  # back later by its own word, not charged a try
    LOST = "lost"  # its claim had been taken back: someone else settles it


def notify(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """Send `signal` to each receiver; one that raises (anything at all) is logged, not felt."""
    if not signal.receivers:
        return  # most projects connect none: the per-job hot path then costs nothing
    try:
        results = signal.send_robust(sender=sender, **kwargs)
    except BaseException as error:  # a receiver never stops a worker
        logger.error("A receiver of a laterite signal raised %r; ignored", error,
                     extra={"action": "signal_error"})
        return
    for receiver, result in results:
        if isinstance(result, BaseException):
            logger.error("Signal receiver %r raised %r; ignored", receiver, result,
                         exc_info=result, extra={"action": "signal_error"})


class Settler:
    """Apply decisions to `store`, retrying a store that is down for up to `patience` s."""

    def __init__(
        self,
        store: Store,
        *,
        patience: float,
        stop_now: Callable[[], bool] = lambda: False,
        on_unavailable: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.patience = patience
        self.stop_now = stop_now
        self.on_unavailable = on_unavailable

    def apply(self, claim: Claim, decision: Decision, *, checkpoint: str | None = None) -> str:
        """Carry out `decision` for `claim`; return a `Settled` word. `checkpoint`: the
        job's checkpoint to store with a snooze (its snoozes counted).

        The error is stored escaped where no store could keep it as raised (a NUL, a
        lone surrogate): refused, it would leave the job claimed and its error lost.
        """
        if decision.error:
            error = storable(decision.error)
            if error is not decision.error:
                decision = replace(decision, error=error)
        action = decision.action
        if action is Action.DELETE:
            deleted = self.patiently(lambda: self.store.delete([claim]))
            return Settled.SUCCEEDED if deleted else Settled.LOST
        if action is Action.GIVE_BACK:
            returned = self.patiently(lambda: self.store.release(
                claim, _NOW, decision.error, uncharged=True,
                started=decision.started))
            return Settled.RETURNED if returned else Settled.LOST
        if action is Action.SNOOZE:
            delay = timedelta(seconds=decision.delay or 0.0)  # by the store's clock
            snoozed = self.patiently(lambda: self.store.release(
                claim, delay, decision.error, uncharged=True, checkpoint=checkpoint))
            return Settled.SNOOZED if snoozed else Settled.LOST
        if action is Action.RELEASE:
            return self._release(claim, decision)
        return self._fail(claim, decision.error)

    def _release(self, claim: Claim, decision: Decision) -> str:
        at: datetime | timedelta | None = decision.at
        assert at is not None
        if decision.delay is not None:  # counted from the store's now, by its clock
            at = timedelta(seconds=decision.delay)
        crash_point("release.before")  # the attempt ran, its retry not stored
        try:
            released = self.patiently(lambda: self.store.release(claim, at, decision.error))
        except StoreUnavailable:
            raise
        except Exception as e:  # the store refused it: the failed list says why
            logger.exception("Could not release job %s #%s", claim.name, claim.id)
            return self._fail(claim, f"{decision.error}\n\nCould not be retried: {e!r}")
        if not released:
            return Settled.LOST
        crash_point("release.after")
        notify(job_retrying, registry.find(claim.name) or Settler, id=claim.id,
              name=claim.name, queue=claim.queue, attempts=claim.attempts,
              error=decision.error, delay=decision.delay)
        return Settled.RETRYING

    def _fail(self, claim: Claim, error: str) -> str:
        crash_point("fail.before")  # the attempt ran, its failure not stored
        failed_id = self.patiently(lambda: self.store.fail(claim, error))
        if failed_id is None:
            return Settled.LOST
        crash_point("fail.after")
        notify(job_failed, registry.find(claim.name) or Settler, id=claim.id, name=claim.name,
              queue=claim.queue, attempts=claim.attempts, error=error,
              payload=claim.payload, failed_id=failed_id)
        return Settled.FAILED

    def patiently(self, action: Callable[[], T]) -> T:
        """Run a store call, retrying while the store is down, up to `patience` seconds.

        A finished job settled late beats one run twice; a stop-now ends the wait.
        """
        deadline = time.monotonic() + self.patience
        waits = Growing(0.25, cap=5.0)
        while True:
            try:
                return action()
            except StoreUnavailable as e:
                wait = waits.next()
                if self.stop_now() or time.monotonic() + wait > deadline:
                    raise
                logger.warning(
                    "Store unavailable while settling a job (%s); retrying in %.1f s", e, wait,
                    extra={"action": "store_unavailable"},
                )
                self.on_unavailable()
                time.sleep(wait)
