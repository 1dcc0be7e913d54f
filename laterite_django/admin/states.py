"""A queued job's state, read from its columns: waiting, delayed, held, running or
abandoned.

The admin shows and filters by it; a claim older than LATERITE_QUEUE_RETRY_AFTER
counts as abandoned (its worker stopped beating), as the worker itself decides.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from ..conf import settings
from ..core.sequences import HELD_AT

__all__ = ["STATES", "state_filter", "state_of"]

WAITING = "waiting"
DELAYED = "delayed"
HELD = "held"
RUNNING = "running"
ABANDONED = "abandoned"

# value -> (label, what it means), in the order a job goes through them.
STATES: dict[str, tuple[str, str]] = {
    WAITING: ("waiting", "Due now; the next free worker on its queue takes it."),
    DELAYED: ("delayed", "Not due yet: pushed for later or waiting out its backoff."),
    HELD: ("held", "Of a sequence: waits until the job before it in its sequence has ended."),
    RUNNING: ("running", "Claimed by a worker that still refreshes its claim."),
    ABANDONED: (
        "running past retry_after",
        "Claimed, but its worker stopped refreshing the claim: it will be taken again.",
    ),
}


def _stale_before(now: datetime) -> datetime:
    return now - timedelta(seconds=float(settings.RETRY_AFTER))


def state_of(job: Any, now: datetime | None = None) -> str:
    """Return the state of a `Job` row (one of STATES' keys)."""
    now = now or timezone.now()
    if job.token is None:
        if job.available_at <= now:
            return WAITING
        # A job held behind its sequence's head is due at HELD_AT until its turn.
        return HELD if job.available_at >= HELD_AT else DELAYED
    if job.claimed_at is not None and job.claimed_at >= _stale_before(now):
        return RUNNING
    return ABANDONED


def state_filter(state: str, now: datetime | None = None) -> Q:
    """Return the `Job` filter that selects the rows in `state`.

    Raise ValueError naming the state if it is not one of STATES.
    """
    now = now or timezone.now()
    if state == WAITING:
        return Q(token__isnull=True, available_at__lte=now)
    if state == DELAYED:
        return Q(token__isnull=True, available_at__gt=now, available_at__lt=HELD_AT)
    if state == HELD:
        return Q(token__isnull=True, available_at__gte=HELD_AT)
    if state == RUNNING:
        return Q(token__isnull=False, claimed_at__gte=_stale_before(now))
    if state == ABANDONED:
        return Q(token__isnull=False) & (
            Q(claimed_at__lt=_stale_before(now)) | Q(claimed_at__isnull=True)
        )
    raise ValueError(f"No job state is called {state!r}; allowed: {', '.join(STATES)}.")
