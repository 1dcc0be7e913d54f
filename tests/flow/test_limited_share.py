"""A worker's claim takes at most half a limited queue's concurrency, so that workers
share the room: a claimed job counts as running, and one worker's batch holding all
of it would leave the others idle while it runs the batch one job after another."""

from __future__ import annotations

import pytest

from laterite_django.worker.loop import Worker
from tests.testapp.jobs import record

pytestmark = pytest.mark.django_db(transaction=True)


def grown(worker: Worker) -> Worker:
    worker._limit = worker.batch  # as after quick jobs from a deep queue
    return worker


def test_two_workers_share_a_limited_queues_room(store, settings):
    settings.LATERITE_QUEUE_LIMITS = {"default": {"concurrency": 5}}
    for i in range(10):
        record.push(str(i))
    first, second = (grown(Worker(["default"], batch=20)) for _ in range(2))
    a = store.claim(["default"], "a", limit=first._claim_limit())
    b = store.claim(["default"], "b", limit=second._claim_limit())
    assert (len(a), len(b)) == (3, 2)


def test_the_smallest_limit_of_the_queues_served_sets_the_share(store, settings):
    settings.LATERITE_QUEUE_LIMITS = {"default": {"concurrency": 8}, "mail": {"concurrency": 1},
                                      "low": {"rate": "5/s"}}
    assert grown(Worker(["default", "mail", "low"], batch=20))._claim_limit() == 1
    assert grown(Worker(["default", "low"], batch=20))._claim_limit() == 4
    assert grown(Worker(["low"], batch=20))._claim_limit() == 20  # a rate: no share
    settings.LATERITE_QUEUE_LIMITS = {}
    assert grown(Worker(["default"], batch=20))._claim_limit() == 20
