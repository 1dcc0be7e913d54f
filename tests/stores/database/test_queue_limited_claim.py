"""A queue's limits enforced by the store's claim alone, with claims racing in threads
(each on a connection of its own): together they never hold more jobs of the queue
than its concurrency nor start more than its rate, and every job is claimed once.

No job of this process declares `concurrency`, so on PostgreSQL these are the claims
of `postgres.queue_limited_claim` (stores/database/postgres.py) (the worker-process tests in
tests/flow/test_flow_limits.py register such a job: theirs are the keyed ones)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from laterite_django import payload
from laterite_django.flow.limits import any_job_limited
from laterite_django.stores import Claim, NewJob, QueueCounts, Store

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 4
_NONE = QueueCounts()  # a queue with no job has no counts


@pytest.fixture(autouse=True)
def _queue_only():
    # The claim these tests are for: no registered job with a concurrency limit.
    assert not any_job_limited()


def jobs(queue: str, count: int, priority: int = 0) -> list[NewJob]:
    now = timezone.now()
    return [
        NewJob(name="tests.noop", queue=queue, payload=payload.encode("tests.noop", [i], {}),
               available_at=now, pushed_at=now, priority=priority)
        for i in range(count)
    ]


def race(work: Callable[[int], None]) -> None:
    """Run `work(n)` in THREADS threads started together; raise what one raised."""
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            start.wait()
            work(n)
        except BaseException as e:  # raised again below
            errors.append(e)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def test_racing_claims_hold_exactly_the_concurrency_and_no_more(store: Store):
    store.push(jobs("low", 40))
    taken: list[Claim] = []

    def claim_until_full(n: int) -> None:
        # Nothing is finished: once the queue's room is taken, every claim gets none.
        while got := store.claim(["low"], f"w{n}", limit=2):
            taken.extend(got)

    with override_settings(LATERITE_QUEUE_LIMITS={"low": {"concurrency": 3}}):
        race(claim_until_full)
        assert len(taken) == 3
        assert store.counts()["low"].running == 3
        # Each finished job gives its place back in the claim that deletes it.
        again = store.settle_and_claim(taken[:2], ["low"], "w", limit=5)
        assert len(again) == 2
        assert store.counts()["low"].running == 3


def test_racing_claims_start_exactly_the_rate_and_no_more(store: Store):
    store.push(jobs("low", 40))
    taken: list[Claim] = []

    def claim_and_finish(n: int) -> None:
        held: list[Claim] = []
        # Each claim deletes the jobs of the one before: only the rate holds them back.
        while held := store.settle_and_claim(held, ["low"], f"w{n}", limit=2):
            taken.extend(held)

    with override_settings(LATERITE_QUEUE_LIMITS={"low": {"rate": "7/h"}}):
        race(claim_and_finish)
    assert len(taken) == 7
    assert store.counts()["low"].waiting == 33


def test_racing_claims_drain_a_limited_queue_each_job_once_within_its_concurrency(
        store: Store):
    store.push(jobs("low", 120))
    taken: list[int] = []
    most = 0
    done = threading.Event()

    def watch() -> None:
        # Each read is one snapshot of committed claims: none may show more than 3.
        nonlocal most
        try:
            while not done.is_set():
                most = max(most, store.counts().get("low", _NONE).running)
        finally:
            connections.close_all()

    def drain(n: int) -> None:
        held: list[Claim] = []
        while True:
            held = store.settle_and_claim(held, ["low"], f"w{n}", limit=2)
            taken.extend(c.id for c in held)
            if not held and store.counts().get("low", _NONE).total == 0:
                return

    watcher = threading.Thread(target=watch)
    with override_settings(LATERITE_QUEUE_LIMITS={"low": {"concurrency": 3}}):
        watcher.start()
        try:
            race(drain)
        finally:
            done.set()
            watcher.join()
    assert len(taken) == 120 and len(set(taken)) == 120
    assert 1 <= most <= 3
    assert store.counts().get("low", _NONE).total == 0


def test_a_limited_queue_gives_its_room_and_the_next_queue_the_rest(store: Store):
    store.push(jobs("low", 5, priority=1) + jobs("default", 5))
    with override_settings(LATERITE_QUEUE_LIMITS={"low": {"concurrency": 2}}):
        claims = store.claim(["low", "default"], "w", limit=6)
    assert [c.queue for c in claims] == ["low"] * 2 + ["default"] * 4
    assert [c.position for c in claims] == list(range(6))


def test_a_queue_over_its_limit_gets_no_job_until_below_it(store: Store):
    store.push(jobs("low", 6))
    with override_settings(LATERITE_QUEUE_LIMITS={"low": {"concurrency": 3}}):
        held = store.claim(["low"], "w", limit=3)
    # The limit lowered while three run: the room is negative, the claim takes none.
    with override_settings(LATERITE_QUEUE_LIMITS={"low": {"concurrency": 1}}):
        assert store.claim(["low"], "w", limit=3) == []
        assert store.settle_and_claim(held[:2], ["low"], "w", limit=3) == []
        assert len(store.settle_and_claim(held[2:], ["low"], "w", limit=3)) == 1
