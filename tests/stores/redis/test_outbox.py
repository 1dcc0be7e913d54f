"""The Redis store's outbox: a push inside transaction.atomic() is a database row that
commits with the caller's data; after the commit it moves to Redis, or, with Redis
down, waits for the workers' sweep. Nothing pushed in a committed transaction is lost."""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.test import override_settings
from redis.exceptions import RedisError

from laterite_django.exceptions import StoreUnavailable
from laterite_django.models import OutboxJob
from laterite_django.stores import get_store, reset_store
from laterite_django.stores.redis import RedisStore
from tests.conftest import job_hashes, redis_store_only
from tests.testapp import jobs
from tests.testapp.models import Record
from tests.worker.test_redis_worker import free_port

__all__: list[str] = []

PREFIX = f"laterite-test-outbox-{os.getpid()}"


@pytest.fixture
def store_kind() -> Iterator[str]:
    """Only the Redis store here (the shared suites run every store)."""
    with redis_store_only(PREFIX) as kind:
        yield kind


class RedisDown:
    """Point the queue's cache at a port where no Redis listens, until `back()`."""

    def __init__(self) -> None:
        location = f"redis://127.0.0.1:{free_port()}/15"
        caches = {**settings.CACHES, "redis": {**settings.CACHES["redis"], "LOCATION": location}}
        self._override = override_settings(CACHES=caches)
        self._override.enable()
        self.down = True
        reset_store()

    def back(self) -> None:
        if self.down:
            self._override.disable()
            self.down = False
            reset_store()


@pytest.fixture
def redis_down(store_kind: str, transactional_db: None) -> Iterator[RedisDown]:
    down = RedisDown()
    try:
        yield down
    finally:
        down.back()


def sweep(store: RedisStore | None = None) -> int:
    """One run of the workers' periodic sweep (it also drains the outbox)."""
    store = store or get_store()
    return store.requeue_abandoned(3600, "worker lost")


def waiting() -> int:
    counts = get_store().counts().get("default")
    return counts.waiting if counts else 0


def ran(kind: str) -> Counter:
    return Counter(Record.objects.filter(kind=kind).values_list("value", flat=True))


# -- Redis up: the outbox is only a step -----------------------------------------------


def test_a_push_in_atomic_is_an_outbox_row_until_the_commit_moves_it(store):
    with transaction.atomic():
        pushed = jobs.record.push("later")
        inside = OutboxJob.objects.count()
    assert inside == 1
    assert pushed.status == "queued" and pushed.id is None
    assert OutboxJob.objects.count() == 0
    claim = store.claim(["default"], "w")[0]
    assert (claim.name, claim.payload) == ("tests.record", '{"args":["later"],"kwargs":{}}')


def test_a_rolled_back_push_leaves_no_outbox_row(store):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.record.push_many([("a",), ("b",)])
        raise RuntimeError("rollback")
    assert OutboxJob.objects.count() == 0 and store.counts() == {}


def move_twice(store: RedisStore, push: Callable[[], object]) -> None:
    """`push` in a transaction, then a move of its rows whose commit is lost (the mover
    dies between the push to Redis and the commit of the rows' deletion): the rows
    come back, and the transaction's commit moves them again."""
    with transaction.atomic():
        push()
        transaction.on_commit(lambda: None)
        ids = list(OutboxJob.objects.values_list("pk", flat=True))
        # The commit's own move, undone: the rows are pushed, then the deletion rolls back.
        with pytest.raises(RuntimeError), transaction.atomic():
            assert store.move_outbox(ids) == len(ids)
            raise RuntimeError("the commit is lost")
        assert OutboxJob.objects.count() == len(ids)
    assert OutboxJob.objects.count() == 0  # moved again at the commit


def test_a_move_whose_commit_is_lost_after_the_push_stores_each_job_once(store):
    """The rows are moved twice; Redis keeps each job once."""
    move_twice(store, lambda: jobs.record.push_many([("a",), ("b",), ("c",)]))
    assert store.counts()["default"].waiting == 3
    assert sweep(store) == 0 and store.counts()["default"].waiting == 3


@pytest.mark.parametrize("wait", [None, 0.05], ids=["direct", "replicated"])
def test_a_limited_job_whose_move_is_made_again_is_stored_once(store, wait):
    """As above for a job with a concurrency limit, which Redis stores by a script of
    its own, and with LATERITE_QUEUE_REDIS_WAIT (no replica here: the push is not
    confirmed, and the move counts it as made all the same)."""
    from laterite_django import job
    from laterite_django.registry import registry

    @job("tests.outbox_keyed_again", concurrency=1, concurrency_key=lambda n: f"n:{n}")
    def keyed(n: int) -> None: ...

    try:
        with override_settings(LATERITE_QUEUE_REDIS_WAIT=wait):
            move_twice(store, lambda: keyed.push_many([(1,), (2,)]))
        assert store.counts()["default"].waiting == 2
        assert sorted(store.client.hget(key, "ck") for key in job_hashes(
            store.client, store.prefix)) == [b"n:1", b"n:2"]
    finally:
        registry.unregister("tests.outbox_keyed_again")


def test_a_moved_duplicate_of_a_waiting_unique_job_is_dropped(store):
    assert jobs.unique.push(7).status == "queued"
    with transaction.atomic():
        assert jobs.unique.push(7).status == "queued"  # not known to be one until moved
    assert OutboxJob.objects.count() == 0
    assert store.counts()["default"].waiting == 1


def test_push_outside_atomic_stays_direct_and_raises_when_redis_is_down(redis_down):
    with pytest.raises((StoreUnavailable, RedisError)):
        jobs.record.push("now")
    assert OutboxJob.objects.count() == 0


# -- Redis down at the commit ------------------------------------------------------------


def test_a_commit_while_redis_is_down_keeps_the_job_for_the_workers(redis_down, workers, caplog):
    hooks: list[str] = []
    with caplog.at_level(logging.WARNING, logger="laterite"), transaction.atomic():
        Record.objects.create(kind="order", value="42")
        pushed = jobs.record.push("outboxed")
        transaction.on_commit(lambda: hooks.append("a later hook"))
    # The caller's data committed, later hooks ran, the job waits in the outbox.
    assert ran("order") == {"42": 1}
    assert hooks == ["a later hook"]
    assert pushed.status == "queued" and pushed.id is None
    assert list(OutboxJob.objects.values_list("name", flat=True)) == ["tests.record"]
    assert "1 job" in caplog.text and "outbox" in caplog.text
    redis_down.back()
    # A worker's sweep moves it to Redis; the worker runs it, once.
    result = workers.run("--stop-when-empty")
    assert result.returncode == 0, result.stderr
    assert ran("record") == {"outboxed": 1}
    assert OutboxJob.objects.count() == 0 and waiting() == 0


def test_the_sweep_moves_the_outbox_in_order_and_drops_duplicates(redis_down):
    with transaction.atomic():
        jobs.record.push_many([(str(i),) for i in range(3)])
        jobs.unique.push(1)
        jobs.unique.push(1)
    assert OutboxJob.objects.count() == 5
    redis_down.back()
    assert sweep() == 0  # moved jobs are new jobs, not abandoned ones
    assert OutboxJob.objects.count() == 0
    store = get_store()
    claims = store.claim(["default"], "w", limit=10)
    assert [(c.name, c.payload) for c in claims] == [
        ("tests.record", f'{{"args":["{i}"],"kwargs":{{}}}}') for i in range(3)
    ] + [("tests.unique", '{"args":[1],"kwargs":{}}')]


def test_the_sweep_leaves_the_outbox_alone_while_redis_is_down(redis_down):
    with transaction.atomic():
        jobs.record.push("kept")
    with pytest.raises((StoreUnavailable, RedisError)):
        sweep()
    assert OutboxJob.objects.count() == 1


def test_sweeps_of_several_workers_at_once_move_each_row_once(redis_down):
    total = 600
    with transaction.atomic():
        jobs.record.push_many([(str(i),) for i in range(total)])
    assert OutboxJob.objects.count() == total
    redis_down.back()
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def sweeper() -> None:
        mine = RedisStore(database="default", alias="redis", prefix=PREFIX)
        try:
            start.wait()
            sweep(mine)
        except BaseException as e:  # reported below
            errors.append(e)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sweeper) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert OutboxJob.objects.count() == 0
    assert waiting() == total
    store = get_store()
    payloads = [c.payload for c in store.claim(["default"], "w", limit=total + 10)]
    assert sorted(payloads) == sorted(f'{{"args":["{i}"],"kwargs":{{}}}}' for i in range(total))


@pytest.mark.django_db(transaction=True)
def test_a_limited_job_pushed_in_a_transaction_keeps_its_concurrency_key(store):
    from laterite_django import job
    from laterite_django.registry import registry

    @job("tests.outbox_keyed", concurrency=1, concurrency_key=lambda tenant: f"t:{tenant}")
    def keyed(tenant: int) -> None: ...

    try:
        with transaction.atomic():
            keyed.push(7)  # held in the outbox, moved to Redis at the commit
        (key,) = job_hashes(store.client, store.prefix)
        assert store.client.hmget(key, "ck", "cl") == [b"t:7", b"1"]
    finally:
        registry.unregister("tests.outbox_keyed")
