"""Prometheus collectors: the job counters from `Totals`, the queue gauges from the
store, read at each scrape (never kept by the workers, so they are right whichever
worker, host or web process serves them)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

from django.db import connections
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .. import forking
from ..conf import settings
from ..core.values import QueueCounts
from ..stores import Store, get_store
from ..worker.tally import BUCKETS
from .totals import Totals

__all__ = ["JobsCollector", "QueueCollector"]

logger = logging.getLogger("laterite")

STATES = ("waiting", "delayed", "running", "failed")


class JobsCollector(Collector):
    """laterite_jobs_total, laterite_job_duration_seconds, laterite_job_wait_seconds."""

    def __init__(self, totals: Totals) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        jobs, durations, waits = self.totals.snapshot()
        total = CounterMetricFamily(
            "laterite_jobs", "Attempts settled, by how they ended.",
            labels=["queue", "job", "outcome"])
        for (queue, job, outcome), n in sorted(jobs.items()):
            total.add_metric([queue, job, outcome], n)
        yield total
        duration = HistogramMetricFamily(
            "laterite_job_duration_seconds", "How long attempts ran.", labels=["queue", "job"])
        for (queue, job), histogram in sorted(durations.items()):
            duration.add_metric([queue, job], _buckets(histogram), histogram[-1])
        yield duration
        wait = HistogramMetricFamily(
            "laterite_job_wait_seconds", "How long jobs waited from due to started.",
            labels=["queue"])
        for queue, histogram in sorted(waits.items()):
            wait.add_metric([queue], _buckets(histogram), histogram[-1])
        yield wait


def _buckets(histogram: list[float]) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs from per-bucket counts, +Inf last."""
    pairs = []
    running = 0.0
    for bound, count in zip((*map(str, BUCKETS), "+Inf"), histogram[:-1], strict=True):
        running += count
        pairs.append((bound, running))
    return pairs


class QueueCollector(Collector):
    """laterite_queue_jobs{queue,state}, laterite_queue_oldest_waiting_seconds{queue} and
    laterite_queue_paused{queue}, read from the store at each scrape: one count query
    (plus the failed list's), one for the oldest waiting jobs and one for the paused
    queues; and laterite_store_up, 1 when they were read. The queues covered are the
    configured ones, those holding jobs and the paused ones.

    A store that cannot be read leaves the queue gauges out, sets laterite_store_up to 0
    and says why in the log, rather than failing the scrape (which would hide the job
    counters too): the exporters' convention (`pg_up`, `redis_up`)."""

    def __init__(self, store: Callable[[], Store] = get_store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("laterite_store_up",
                               "1 if the queue store answered this scrape, else 0.")
        # Not while the supervisor forks (see laterite_django.forking).
        with forking.lock:
            store = None
            try:
                store = self.store()
                found = store.counts()
                oldest = store.oldest_waiting()
                paused = store.paused_queues()
            except Exception as e:
                logger.warning("Metrics: could not read the queue store: %s", e,
                               extra={"action": "metrics_store_error"})
                found = None
            finally:
                if threading.current_thread() is not threading.main_thread():
                    # A scrape thread: leave no connection behind it.
                    if store is not None:
                        store.close()
                    connections.close_all()
        if found is None:
            up.add_metric([], 0)
            yield up
            return
        counts = {queue: found.get(queue, QueueCounts()) for queue in settings.QUEUES}
        counts.update(sorted(found.items()))
        for queue in sorted(paused - counts.keys()):
            counts[queue] = QueueCounts()
        jobs = GaugeMetricFamily("laterite_queue_jobs", "Jobs per queue and state.",
                                 labels=["queue", "state"])
        now = timezone.now()
        age = GaugeMetricFamily(
            "laterite_queue_oldest_waiting_seconds",
            "How long the queue's oldest waiting job has been due (0: none waits).",
            labels=["queue"])
        pause = GaugeMetricFamily(
            "laterite_queue_paused", "1 if the queue is paused (workers claim none of its "
            "jobs), else 0.", labels=["queue"])
        for queue, c in counts.items():
            for state in STATES:
                jobs.add_metric([queue, state], getattr(c, state))
            since = oldest.get(queue)
            age.add_metric([queue], max((now - since).total_seconds(), 0.0) if since else 0.0)
            pause.add_metric([queue], 1 if queue in paused else 0)
        up.add_metric([], 1)
        yield up
        yield jobs
        yield age
        yield pause
