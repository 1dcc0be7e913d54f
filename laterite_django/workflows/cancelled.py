"""Whether a claimed job's batch was cancelled, asked by the worker before it runs the
job (the Redis store cannot find a batch's waiting jobs at the cancel). One read of
the database per batch and second at most, in each worker process."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..conf import settings
from ..core.marks import marks_of

if TYPE_CHECKING:
    from ..core.values import Claim

__all__ = ["batch_cancelled"]

# How long an answer is kept; a cancel is seen within this time.
FRESH = 1.0

_known: dict[int, tuple[float, bool]] = {}
_lock = threading.Lock()


def batch_cancelled(claim: Claim) -> bool:
    """True if `claim`'s job belongs to a batch that was cancelled (cheap for others)."""
    if '"batch":' not in claim.payload:
        return False
    batch = marks_of(claim.payload).batch
    if batch is None:
        return False
    now = time.monotonic()
    known = _known.get(batch[0])  # one dict read: atomic, no lock needed
    if known is not None and now - known[0] < FRESH:
        return known[1]
    # Models load after the app registry is ready (worker.attempt imports this module, and
    # gunicorn.conf.py and apps.py import the worker before it is): imported on first use.
    from ..models import Batch

    try:
        cancelled = Batch.objects.using(settings.DATABASE).filter(
            pk=batch[0], cancelled_at__isnull=False).exists()
    except Exception:
        return False  # the database is away: run it (the claim's settling will wait)
    with _lock:
        if len(_known) > 10_000:
            _known.clear()
        _known[batch[0]] = (now, cancelled)
    return cancelled
