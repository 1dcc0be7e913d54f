"""`cx.iterate` as a worker runs it, on every store: each cursor saved behind the walk
where the store sends it (PostgreSQL, Redis: on a connection of its own, while the next
chunk is fetched), its answer read before that chunk's items are handed on; on SQLite
between the chunks; inside a transaction of the store's database, in that transaction."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction

from laterite_django.core.checkpoint import Checkpoint
from laterite_django.resumable import ClaimLost
from laterite_django.worker.attempt import _checkpoints
from laterite_django.worker.loop import Worker
from tests.testapp import jobs


def numbers(count: int):
    def fetch(cursor, n):
        start = cursor or 0
        end = min(start + n, count)
        return list(range(start, end)), (end if end < count else None)

    return fetch


@pytest.fixture
def claimed(store):
    jobs.add.push(1, 2)
    (claim,) = store.claim(["default"], "host:9", 1)
    return Worker(["default"], name="host:9", store=store), claim


def saved(store, claim) -> tuple:
    found = Checkpoint.parse(store.checkpoint(claim)).iterations
    return (found[0].cursor, found[0].done, found[0].finished) if found else None


def test_cursors_are_saved_behind_the_walk_and_in_order(store, store_kind, claimed):
    """Sent on a connection of their own (PostgreSQL, Redis; the last, with the loop's
    end, saved the usual way) or saved between the chunks (SQLite)."""
    worker, claim = claimed
    checkpoints = _checkpoints(worker, claim)
    savers, seen = [], []
    save = checkpoints._save

    def spy(text, durable):
        savers.append(threading.current_thread().name)
        return save(text, durable)

    checkpoints._save = spy
    for n in checkpoints.iterate(numbers(50), chunk=10):
        if n % 10 == 0 and n:  # the chunk before is saved before this one is handed on
            assert saved(store, claim) == (n, n, False)
        seen.append(n)
    assert seen == list(range(50))
    assert saved(store, claim) == (40, 50, True)
    sent = store_kind == "redis" or connection.vendor == "postgresql"
    assert savers == ["MainThread"] * (1 if sent else 5)
    assert not [t for t in threading.enumerate() if t.name.startswith("laterite-cursor")]


def test_a_lost_claim_stops_the_walk_before_the_next_chunk(store, claimed):
    worker, claim = claimed
    seen = []
    with pytest.raises(ClaimLost):
        for n in _checkpoints(worker, claim).iterate(numbers(50), chunk=10):
            seen.append(n)
            if n == 15:  # taken back while chunk 2 runs: its save fails
                assert store.release(claim, timedelta(0), "taken back", uncharged=True)
    assert seen == list(range(20))
    assert saved(store, claim) == (10, 10, False)


def test_inside_the_job_s_transaction_the_cursor_commits_with_it(store, store_kind,
                                                                  claimed):
    if store_kind != "database":
        pytest.skip("a transaction of the store's database")
    worker, claim = claimed
    with pytest.raises(RuntimeError), transaction.atomic():
        for n in _checkpoints(worker, claim).iterate(numbers(50), chunk=10):
            if n == 25:
                assert saved(store, claim) == (20, 20, False)  # in the transaction
                raise RuntimeError("the job's work is rolled back")
    assert saved(store, claim) is None  # and its cursors with it
