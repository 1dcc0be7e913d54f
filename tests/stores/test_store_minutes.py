"""Store.add_minutes and Store.minutes: the overview's counts per queue and minute,
on every store; and the worker that writes them."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from laterite_django.core.minutes import KEEP, Minute, MinuteCounts, minute_start
from laterite_django.testing import run_jobs
from tests.testapp import jobs


def test_counts_add_up_per_queue_and_minute(store):
    now = minute_start(timezone.now())
    before = now - timedelta(minutes=1)
    assert store.minutes(before) == []
    store.add_minutes([Minute("default", before, 3, 1), Minute("mail", now, 2, 0)])
    store.add_minutes([Minute("default", before, 1, 1), Minute("default", now, 5, 0)])
    store.add_minutes([])
    assert store.minutes(before) == [
        Minute("default", before, 4, 2),
        Minute("default", now, 5, 0),
        Minute("mail", now, 2, 0),
    ]
    assert store.minutes(now) == [Minute("default", now, 5, 0), Minute("mail", now, 2, 0)]


def test_old_minutes_are_let_go(store):
    now = minute_start(timezone.now())
    long_ago = now - KEEP - timedelta(hours=1)  # the overview's day chart reads 24 h
    store.add_minutes([Minute("default", long_ago, 1, 0)])
    store.add_minutes([Minute("default", now, 1, 0)])
    assert store.minutes(long_ago) == [Minute("default", now, 1, 0)]


def test_a_worker_counts_its_successes_and_failures(store):
    jobs.noop.push_many([(i,) for i in range(3)])
    jobs.fail_now.push("x")
    jobs.mail.push("m")
    run_jobs(["default", "mail"])
    found = {m.queue: (m.succeeded, m.failed) for m in store.minutes(timezone.now())}
    assert found == {"default": (3, 1), "mail": (1, 0)}


def test_counts_kept_in_memory_between_writes():
    counts = MinuteCounts(every=3600)
    counts.count("default", "succeeded")
    counts.count("default", "retrying")  # neither a success nor a failure
    counts.count("default", "failed")
    assert not counts.due()
    taken = counts.take()
    assert [(m.queue, m.succeeded, m.failed) for m in taken] == [("default", 1, 1)]
    assert counts.take() == []
    counts.put_back(taken)
    assert [(m.queue, m.succeeded, m.failed) for m in counts.take()] == [("default", 1, 1)]
