"""A worker deletes its finished jobs every SETTLE_EVERY while more of a bigger batch
wait to start: a claim may take up to `--batch` jobs (100 by default), yet a worker
killed or cut off runs again at most SETTLE_EVERY finished jobs (every store)."""

from __future__ import annotations

import pytest

from laterite_django.worker import loop
from laterite_django.worker.loop import SETTLE_EVERY, Worker
from tests.testapp.jobs import left_in_store
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def count_rule_only(monkeypatch):
    """Only the count rule under test deletes: the time rule (finished jobs deleted
    after FLUSH_AFTER, a slow job's batch given back) would fire on a slow machine
    at any job, where these tests' jobs each make a round trip of their own."""
    monkeypatch.setattr(loop, "FLUSH_AFTER", 3600.0)


def finished_not_deleted(total: int) -> list[int]:
    """For each job in the order they started: how many jobs had finished before it
    without being deleted (started before it, minus those gone from the store)."""
    left = Record.objects.filter(kind="left").order_by("id").values_list("value", flat=True)
    return [started - (total - int(remaining)) for started, remaining in enumerate(left)]


def test_a_big_batch_is_deleted_every_settle_every_jobs(store):
    total = 3 * SETTLE_EVERY + 5
    left_in_store.push_many([(i,) for i in range(total)])
    worker = Worker(["default"], batch=100, manage_connections=False)
    worker._limit = worker.batch  # as after quick jobs from a deep queue
    claims = store.claim(["default"], worker.name, limit=worker._claim_limit())
    assert len(claims) == total
    worker.run_claims(claims)
    held = finished_not_deleted(total)
    assert len(held) == total
    # Deleted in groups: 0, 1, ..., SETTLE_EVERY - 1, then 0 again, never more.
    assert held == [k % SETTLE_EVERY for k in range(total)]
    # The last group is deleted with the next claim, which finds nothing more.
    assert store.counts()["default"].running == total % SETTLE_EVERY
    assert store.settle_and_claim(worker.hand.take_finished(), ["default"], worker.name, 1) == []
    assert "default" not in store.counts()


def test_a_batch_of_settle_every_or_fewer_is_deleted_with_the_next_claim(store):
    left_in_store.push_many([(i,) for i in range(SETTLE_EVERY)])
    worker = Worker(["default"], batch=100, manage_connections=False)
    worker._limit = worker.batch
    worker.run_claims(store.claim(["default"], worker.name, limit=worker._claim_limit()))
    # No extra round trip: the last job's end leaves none waiting to start.
    assert finished_not_deleted(SETTLE_EVERY) == list(range(SETTLE_EVERY))
    assert store.counts()["default"].running == SETTLE_EVERY
