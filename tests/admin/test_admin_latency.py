"""The overview's latency chart: workers sample each queue's oldest waiting job's age
once a minute (one sample per queue and minute of them all, from the heartbeat thread,
never per job), and the overview draws the last 24 hours of it (every store)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from laterite_django.core.minutes import Minute, minute_start
from laterite_django.worker.loop import Worker
from tests.conftest import wait_for
from tests.testapp import jobs

OVERVIEW = reverse("admin:laterite_django_minutecount_changelist")


def section(html: str, queue: str) -> str:
    return html.split(f'data-queue="{queue}"', 1)[1].split("</section>", 1)[0]


def fact(html: str, queue: str, name: str) -> str:
    return re.search(rf'data-fact="{name}">(.*?)</dd>', section(html, queue), re.S).group(1)


def latency_chart(html: str, queue: str) -> str:
    chart = section(html, queue).split('class="laterite-chart laterite-latency-chart"', 1)[1]
    return chart.split("</svg>", 1)[0]


def latencies(store, queue: str) -> list[float]:
    since = timezone.now() - timedelta(minutes=5)
    return [m.latency for m in store.minutes(since) if m.queue == queue and m.latency is not None]


def test_a_running_worker_samples_the_latency_and_the_overview_draws_it(
        admin_client, store, workers):
    # A job of `mail` due 5 minutes ago, which the worker (of `default`) leaves waiting.
    jobs.mail.enqueue(("late",), {}, at=timezone.now() - timedelta(minutes=5))
    worker = workers.start("--queue", "default")
    wait_for(lambda: latencies(store, "mail"), timeout=30)
    [mail] = latencies(store, "mail")
    assert 295 <= mail < 400
    assert latencies(store, "default") == [0.0]  # sampled: nothing of it waited
    worker.terminate()
    worker.communicate(timeout=30)
    html = admin_client.get(OVERVIEW).content.decode()
    assert fact(html, "mail", "latency").startswith("5 min")
    chart = latency_chart(html, "mail")
    assert chart.count('class="laterite-bar-latency"') == 1
    assert re.search(r"the last 15 min: the oldest waiting job had waited 5 min", chart)
    assert "longest wait 5 min" in chart  # the scale
    assert "no job waited" in latency_chart(html, "default")
    assert fact(html, "default", "latency") == "0 s"


def test_one_sample_per_queue_and_minute_is_kept(store):
    minute = minute_start(timezone.now())
    jobs.record.enqueue(("waiting",), {}, at=timezone.now() - timedelta(seconds=90))
    assert store.sample_latency(minute, ["default", "mail"]) is True
    # Another worker of the same minute finds it sampled and leaves it.
    jobs.record.enqueue(("older",), {}, at=timezone.now() - timedelta(hours=1))
    assert store.sample_latency(minute, ["default", "low"]) is False
    # The counts of the minute added after it keep the sample, and it keeps them.
    store.add_minutes([Minute("default", minute, 3, 1)])
    [default] = [m for m in store.minutes(minute) if m.queue == "default"]
    assert (default.succeeded, default.failed) == (3, 1)
    assert 89 <= default.latency < 120
    assert {m.queue: m.latency for m in store.minutes(minute)}["mail"] == 0.0
    assert "low" not in {m.queue for m in store.minutes(minute)}
    # Another minute (a late worker's: the one before) is sampled again: the hour-old job.
    other = minute - timedelta(minutes=1)
    assert store.sample_latency(other, ["default"]) is True
    assert next(m.latency for m in store.minutes(other)
                if m.queue == "default" and m.minute == other) >= 3600 - 5


def test_the_overview_draws_the_day_of_samples_by_quarters(admin_client, store):
    now = minute_start(timezone.now())
    store.sample_latency(now - timedelta(hours=23, minutes=50), ["low"])
    store.sample_latency(now - timedelta(hours=2), ["low"])  # nothing waits: 0
    jobs.low.enqueue(("x",), {}, at=timezone.now() - timedelta(minutes=10))
    store.sample_latency(now, ["low"])
    html = admin_client.get(OVERVIEW).content.decode()
    chart = latency_chart(html, "low")
    assert chart.count('class="laterite-bar-latency"') == 3
    assert "the last 15 min: the oldest waiting job had waited 10 min" in chart
    assert "no job waited" in chart
    assert fact(html, "low", "latency").startswith("10 min")


def counting(calls: list[int], method: Callable) -> Callable:
    def counted(*args, **kwargs):
        calls.append(1)
        return method(*args, **kwargs)
    return counted


def test_the_sampler_costs_no_round_trip_per_job(store):
    sampled: list[int] = []
    read: list[int] = []
    store.sample_latency = counting(sampled, store.sample_latency)
    store.oldest_waiting = counting(read, store.oldest_waiting)
    jobs.sleeper.push_many([(0.02, "x")] * 200)  # 4 s of jobs, one by one: many turns
    worker = Worker(["default"], store=store, stop_when_empty=True, batch=1)
    assert worker.run() == 200
    # Once per minute of the clock whatever the jobs (two if the run spans a minute's
    # end), and the store's latency read only by the sampler.
    assert 1 <= len(sampled) <= 2
    assert len(read) <= len(sampled)
    assert latencies(store, "default")
