"""The admin's overview page (Background jobs > Overview): per queue, jobs succeeded
and failed per minute over the last hour and per quarter of an hour over the last 24
hours as charts, the queue's latency (its oldest waiting job's age, sampled by the
workers once a minute) over the last 24 hours as a third chart, what waits, how long the
oldest waiting job has been due, whether the queue is paused, and for a fair queue the
keys with the most waiting jobs (core/fairness.py), and the sequences a failed job of the
queue holds, each with a button to let it go on (core/sequences.py). Everything is
read from the store at each load; the per-minute counts are written by the workers
(see `minutes`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.safestring import SafeString

from ..conf import settings
from ..core.fairness import WaitingByKey
from ..core.minutes import Minute, minute_start
from ..core.sequences import HeldSequence
from ..core.values import QueueCounts
from ..stores import get_store
from .chart import latency_chart, minute_chart
from .summary import CAP
from .workers import worker_counts

__all__ = ["OverviewAdmin", "overview_rows"]

logger = logging.getLogger("laterite")

MINUTES = 60
# The day's chart: 96 bars of 15 minutes.
DAY_STEP = 15
DAY_BARS = 24 * 60 // DAY_STEP


@dataclass(frozen=True)
class QueueOverview:
    queue: str
    counts: QueueCounts
    oldest_waiting: float | None  # seconds
    succeeded: int  # in the last hour
    failed: int
    chart: SafeString
    day_chart: str = ""  # the last 24 hours, 15 min a bar (a SafeString)
    day_succeeded: int = 0
    day_failed: int = 0
    latency_chart: str = ""  # the last 24 hours' latency, 15 min a bar (a SafeString)
    latency_peak: float | None = None  # seconds: the longest sampled, None if none was
    paused: bool = False  # flow control: queue_pause
    fair: WaitingByKey | None = None  # a fair queue's waiting jobs per key, the top ones
    # The sequences held by a failed head of this queue (core/sequences.py).
    held: tuple[HeldSequence, ...] = ()


def overview_rows(now: datetime | None = None) -> list[QueueOverview]:
    """One row per queue: LATERITE_QUEUE_QUEUES first, then any other with jobs, counts
    or a pause (a paused queue shows even with nothing in it)."""
    now = now or timezone.now()
    store = get_store()
    counts = store.counts(cap=CAP)  # "10000+" past the cap, as the lists' summary
    oldest = store.oldest_waiting()
    paused = store.paused_queues()
    fair = store.fair_waiting()
    held = store.held_sequences()
    first = minute_start(now) - timedelta(minutes=MINUTES - 1)
    day_first = minute_start(now) - timedelta(minutes=DAY_BARS * DAY_STEP - 1)
    minutes: list[Minute] = store.minutes(day_first)
    queues = list(dict.fromkeys([*settings.QUEUES, *sorted(counts),
                                 *sorted({m.queue for m in minutes}), *sorted(paused)]))
    rows = []
    for queue in queues:
        series = [(0, 0)] * MINUTES
        day = [(0, 0)] * DAY_BARS
        latency: list[float | None] = [None] * DAY_BARS  # the longest sample of each bar
        for m in minutes:
            if m.queue == queue:
                index = int((m.minute - first).total_seconds() // 60)
                if 0 <= index < MINUTES:
                    s, f = series[index]
                    series[index] = (s + m.succeeded, f + m.failed)
                # Bars end at this minute: the last one holds the last 15 minutes.
                bar = DAY_BARS - 1 - int((minute_start(now) - m.minute).total_seconds()
                                         // 60 // DAY_STEP)
                if 0 <= bar < DAY_BARS:
                    s, f = day[bar]
                    day[bar] = (s + m.succeeded, f + m.failed)
                    if m.latency is not None:
                        latency[bar] = max(latency[bar] or 0.0, m.latency)
        since = oldest.get(queue)
        rows.append(QueueOverview(
            queue=queue, counts=counts.get(queue, QueueCounts()),
            oldest_waiting=max((now - since).total_seconds(), 0.0) if since else None,
            succeeded=sum(s for s, _ in series), failed=sum(f for _, f in series),
            chart=minute_chart(series, f"Jobs of {queue} per minute, last hour"),
            day_chart=minute_chart(day, f"Jobs of {queue} per 15 minutes, last 24 hours",
                                   DAY_STEP),
            day_succeeded=sum(s for s, _ in day), day_failed=sum(f for _, f in day),
            latency_chart=latency_chart(
                latency, f"Latency of {queue} (the oldest waiting job's age) per 15 "
                         f"minutes, last 24 hours", DAY_STEP),
            latency_peak=max((v for v in latency if v is not None), default=None),
            paused=queue in paused, fair=fair.get(queue),
            held=tuple(h for h in held if h.queue == queue),
        ))
    return rows


class OverviewAdmin(admin.ModelAdmin):
    """Shown as "Overview" in the app's list; its list page is the overview."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None
                        ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        error = ""
        rows: list[QueueOverview] = []
        workers: tuple[int, int] | None = None  # (alive, lost), linked to their page
        try:
            rows = overview_rows()
            workers = worker_counts(get_store().workers())
        except Exception as e:
            logger.warning("The admin could not read the overview: %s", e,
                           extra={"action": "admin_overview_failed"})
            error = f"The queue store cannot be read: {e}"
        context = {
            **self.admin_site.each_context(request),
            "title": "Overview",
            "subtitle": None,
            "opts": self.model._meta,
            "app_label": self.model._meta.app_label,
            "rows": rows,
            "error": error,
            "store": str(settings.STORE),
            "minutes": MINUTES,
            "workers": workers,
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "laterite_django/admin/overview.html", context)
