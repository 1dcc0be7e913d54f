"""The per-queue summary above both changelists, from the store's `counts()`.

It asks the configured store, so with the Redis store the jobs waiting in
Redis are counted too. It is read once per request: the queue filter lists
the same queues.

Each count a store reads row by row stops at `CAP` and is shown as "10000+": at
10^6 jobs and 10^6 failed jobs on PostgreSQL, counting every row per queue and
state took 0.3 s of each page load; counted up to the cap through the queue
indexes (index-only scans) it takes 0.05 s, whatever the tables hold. Below the
cap, as in most projects, every count is exact.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.http import HttpRequest

from ..conf import settings
from ..core.values import QueueCounts
from ..stores import get_store
from .paginator import ESTIMATE_ABOVE

__all__ = ["CAP", "QueueRow", "Summary", "queue_summary"]

logger = logging.getLogger("laterite.admin")

_CACHE_ATTR = "_laterite_queue_summary"

# Counts stop here ("10000+"): as far as the lists' row counts are exact.
CAP = ESTIMATE_ABOVE


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue's line in the summary."""

    queue: str
    waiting: int
    delayed: int
    running: int
    failed: int
    paused: bool = False  # flow control: queue_pause
    # The states whose count stopped at CAP: there are more.
    capped: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Summary:
    """Every queue's counts, the store they came from, or why they could not be read."""

    rows: tuple[QueueRow, ...]
    store: str
    error: str = ""

    @property
    def queues(self) -> list[str]:
        return [row.queue for row in self.rows]

    @property
    def totals(self) -> QueueRow:
        """Every queue's counts added; a state capped in one queue is at least its sum."""
        return QueueRow(
            queue="",
            waiting=sum(r.waiting for r in self.rows),
            delayed=sum(r.delayed for r in self.rows),
            running=sum(r.running for r in self.rows),
            failed=sum(r.failed for r in self.rows),
            capped=frozenset().union(*(r.capped for r in self.rows)),
        )

    @property
    def capped(self) -> bool:
        """Whether a count stopped at CAP."""
        return any(r.capped for r in self.rows)

    @property
    def cap(self) -> int:
        return CAP


def _row(queue: str, counts: QueueCounts, paused: bool = False) -> QueueRow:
    return QueueRow(queue, counts.waiting, counts.delayed, counts.running, counts.failed,
                    paused, frozenset(counts.capped))


def queue_summary(request: HttpRequest) -> Summary:
    """Return the summary for this request, asking the store the first time only.

    A store that cannot be read (Redis down, say) gives an empty summary with
    the error, so the failed list stays usable.
    """
    cached = getattr(request, _CACHE_ATTR, None)
    if cached is not None:
        return cached
    kind = str(settings.STORE)
    try:
        store = get_store()
        counts = store.counts(cap=CAP)
        paused = store.paused_queues()
    except Exception as e:
        logger.warning("The admin could not read the queue counts: %s", e,
                       extra={"action": "admin_counts_failed"})
        summary = Summary(rows=(), store=kind, error=f"The queue counts cannot be read: {e}")
    else:
        # A paused queue is listed even with no jobs, so it can be resumed here.
        counts.update((queue, QueueCounts()) for queue in paused if queue not in counts)
        summary = Summary(
            rows=tuple(_row(queue, c, queue in paused) for queue, c in sorted(counts.items())),
            store=kind,
        )
    setattr(request, _CACHE_ATTR, summary)
    return summary
