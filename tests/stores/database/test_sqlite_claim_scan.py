"""What a claim reads on SQLite: about `limit` due jobs per queue, however many are
due (each queue's due index read in its order, not every due job sorted). Counted
in steps of SQLite's virtual machine (a progress handler), not timed."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from laterite_django.stores import NewJob

__all__: list[str] = []

pytestmark = pytest.mark.parametrize("store_kind", ["database"], indirect=True)

MANY = 20_000  # due jobs per queue, besides the few


@pytest.fixture
def sqlite_store(store):
    if connection.vendor != "sqlite":
        pytest.skip("steps counted by SQLite's progress handler (LATERITE_TEST_DB=sqlite)")
    return store


def new(queue: str, at, priority: int = 0) -> NewJob:
    return NewJob(name="tests.record", queue=queue, pushed_at=at, available_at=at,
                  payload=json.dumps({"args": ["x"], "kwargs": {}}), priority=priority)


def steps(call) -> int:
    """Hundreds of SQLite virtual machine steps `call` takes on this connection."""
    connection.ensure_connection()
    raw = connection.connection
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0  # go on

    raw.set_progress_handler(tick, 100)
    try:
        call()
    finally:
        raw.set_progress_handler(None, 100)
    return count


def test_a_claim_reads_about_its_limit_per_queue_however_many_jobs_are_due(sqlite_store):
    store = sqlite_store
    earlier = timezone.now() - timedelta(minutes=1)
    queues = ["default", "mail"]
    store.push([new(queue, earlier, priority=i % 3) for queue in queues for i in range(20)])
    few = steps(lambda: store.claim(queues, "w", limit=10))
    store.push([new(queue, earlier, priority=i % 3) for queue in queues for i in range(MANY)])
    many = steps(lambda: store.claim(queues, "w", limit=10))
    # Sorting every due job at each claim took hundreds of times the steps.
    assert many < 3 * few, (few, many)
    claims = store.claim(queues, "w", limit=3)
    assert [(c.queue, c.priority) for c in claims] == [("default", 2)] * 3
