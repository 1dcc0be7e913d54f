"""What an operator does with batches: list them, newest first, by state; cancel one and
say what happened; show a callback as the call it stands for. `queue_batches` and the
admin's Batches list both use these, so they list and cancel alike on every store
(a batch's row is in the database whichever store holds its jobs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Q

from ..conf import settings
from ..models import Batch
from .batches import cancel_batch

if TYPE_CHECKING:
    from django.db.models import QuerySet

__all__ = [
    "CANCELLED", "FINISHED", "STATES", "UNKNOWN", "WAS_CANCELLED", "CancelOutcome",
    "batch_jobs_filter", "batches", "call_text", "callbacks", "cancel", "listing", "state_filter",
    "succeeded",
]

# value -> what it means, in the order a batch goes through them (Batch.state's words).
STATES: dict[str, str] = {
    "running": "Some of its jobs have not ended yet.",
    "finished": "Every job ended, none failed.",
    "failed": "Every job ended, some failed for good.",
    "cancelled": "Cancelled: its jobs not started are removed, then and catch never pushed.",
}

# What cancelling one batch did (CancelOutcome.outcome, as `queue_batches --json` says).
CANCELLED = "cancelled"
WAS_CANCELLED = "already_cancelled"
FINISHED = "already_finished"
UNKNOWN = "unknown"


def state_filter(state: str) -> Q:
    """The `Batch` filter that selects the rows in `state` (one of STATES, as
    Batch.state reads it); raise ValueError naming any other."""
    if state == "cancelled":
        return Q(cancelled_at__isnull=False)
    live = Q(cancelled_at__isnull=True)
    if state == "running":
        return live & Q(finished_at__isnull=True)
    if state == "finished":
        return live & Q(finished_at__isnull=False, failed=0)
    if state == "failed":
        return live & Q(finished_at__isnull=False, failed__gt=0)
    raise ValueError(f"No batch state is called {state!r}; allowed: {', '.join(STATES)}.")


def batches(state: str | None = None) -> QuerySet[Batch]:
    """Every batch (or those in `state`), newest first, on laterite's database."""
    rows = Batch.objects.using(settings.DATABASE).order_by("-created_at", "-id")
    return rows if state is None else rows.filter(state_filter(state))


def listing(state: str | None = None, limit: int = 50) -> list[Batch]:
    """The newest `limit` batches (those in `state`, if given), newest first."""
    if limit < 1:
        raise ValueError(f"limit must be 1 or more, got {limit!r}.")
    return list(batches(state)[:limit])


def succeeded(row: Batch) -> int | None:
    """How many of the batch's jobs succeeded; None for a cancelled batch, whose jobs
    removed by the cancel are counted as ended, with those that succeeded."""
    return None if row.cancelled_at is not None else row.succeeded


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What cancelling batch `batch_id` did: `outcome` (CANCELLED, WAS_CANCELLED,
    FINISHED or UNKNOWN), the jobs removed at once, and its row after (None if
    unknown)."""

    batch_id: int
    outcome: str
    removed: int = 0
    row: Batch | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.batch_id, "outcome": self.outcome, "removed": self.removed,
                "pending": None if self.row is None else self.row.pending}


def cancel(batch_id: int) -> CancelOutcome:
    """Cancel batch `batch_id` (workflows.batches.cancel_batch) and say what it did.

    A batch that finished or was cancelled before is left as it is, and said so; so is
    one whose last job ends while it is being cancelled."""
    rows = Batch.objects.using(settings.DATABASE)
    before = rows.filter(pk=batch_id).first()
    if before is None:
        return CancelOutcome(batch_id, UNKNOWN)
    if before.cancelled_at is not None:
        return CancelOutcome(batch_id, WAS_CANCELLED, row=before)
    if before.finished_at is not None:
        return CancelOutcome(batch_id, FINISHED, row=before)
    removed = cancel_batch(batch_id)
    after = rows.filter(pk=batch_id).first() or before
    if after.cancelled_at is None:  # its last job ended in between
        return CancelOutcome(batch_id, FINISHED, row=after)
    return CancelOutcome(batch_id, CANCELLED, removed, after)


def call_text(text: str) -> str:
    """A stored callback (`{"job": ..., "args": [...], "kwargs": {...}}`) as the call it
    stands for, `name(1, "a", key=true)`, its values in JSON; "" for none."""
    if not text:
        return ""
    try:
        link = json.loads(text)
        args, kwargs = link.get("args", []), link.get("kwargs", {})
        values = [json.dumps(v, ensure_ascii=False) for v in args]
        values += [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in kwargs.items()]
        return f"{link['job']}({', '.join(values)})"
    except (TypeError, ValueError, KeyError, AttributeError):
        return text  # not a call as calls.py writes one: shown as stored


def callbacks(row: Batch) -> dict[str, str]:
    """A batch's callbacks as calls, by their argument's name (those it has)."""
    texts = {"then": row.then_call, "catch": row.catch_call, "finally_": row.finally_call}
    return {name: call_text(text) for name, text in texts.items() if text}


def batch_jobs_filter(batch_id: int) -> Q:
    """The `Job` or `FailedJob` filter for the jobs of batch `batch_id`: their payload
    ends with the batch mark (workflows.marks writes it last), so an argument that
    holds the same words is not taken for it."""
    batch_id = int(batch_id)
    return Q(payload__contains=f'"batch":[{batch_id},') & Q(
        payload__regex=rf'"batch":\[{batch_id},[0-9]+\]\}}$')
