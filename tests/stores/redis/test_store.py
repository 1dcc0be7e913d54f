"""What only the Redis store has: key prefixes, blocking waits, on-commit pushes, and a
failed-list move that survives a crash between its database and Redis writes."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from laterite_django.models import FailedJob
from laterite_django.stores import NewJob, get_store
from laterite_django.stores.redis import RedisStore
from laterite_django.stores.redis.keys import SENT_TTL
from tests.conftest import redis_store_only
from tests.testapp import jobs

__all__: list[str] = []

PREFIX = f"laterite-test-redis-{os.getpid()}"


@pytest.fixture
def store_kind() -> Iterator[str]:
    """Only the Redis store here (the shared suites run every store)."""
    with redis_store_only(PREFIX, PREFIX + "-other") as kind:
        yield kind


def new(queue="default", *, at=None, key=None, value="x"):
    now = timezone.now()
    return NewJob(
        name="tests.record",
        queue=queue,
        payload=f'{{"args":["{value}"],"kwargs":{{}}}}',
        available_at=at or now,
        pushed_at=now,
        unique_key=key,
    )


def expire_claims(store: RedisStore) -> int:
    """Requeue every claim as if its worker had stopped beating an hour ago."""
    return store.requeue_abandoned(-3600, "worker lost")


# -- keys ----------------------------------------------------------------------


def test_every_key_lives_under_the_prefix(store):
    from django_redis import get_redis_connection

    store.push([new(), new(at=timezone.now() + timedelta(hours=1)), new(key="k")])
    store.claim(["default"], "w")
    keys = {k.decode() for k in get_redis_connection("redis").scan_iter(match="*")}
    mine = {k for k in keys if k.startswith(f"{PREFIX}:")}
    assert {f"{PREFIX}:id", f"{PREFIX}:queues", f"{PREFIX}:unique"} <= mine
    assert f"{PREFIX}:queue:default:claimed" in mine
    store.clear()
    client = get_redis_connection("redis")
    left = {k.decode() for k in client.scan_iter(match=f"{PREFIX}:*")}
    # The id counter stays (ids are never reused), and the note of this thread's last
    # push, which expires (redis_resend).
    (sent,) = {k for k in left if k.startswith(f"{PREFIX}:sent:")}
    assert 0 < client.ttl(sent) <= SENT_TTL
    assert left == {f"{PREFIX}:id", sent}


def test_two_prefixes_do_not_see_each_other(store):
    other = RedisStore(database="default", alias="redis", prefix=PREFIX + "-other")
    mine_id = store.push([new(key="same")])[0]
    theirs_id = other.push([new(key="same")])[0]
    assert mine_id and theirs_id  # the unique key is per prefix too
    assert store.counts()["default"].pending == other.counts()["default"].pending == 1
    assert [c.id for c in other.claim(["default"], "w")] == [theirs_id]
    assert store.counts()["default"].pending == 1
    assert other.clear() == 1
    assert store.counts()["default"].pending == 1


def test_the_prefix_must_not_be_empty():
    with pytest.raises(Exception, match="LATERITE_QUEUE_PREFIX is ''"):
        RedisStore(database="default", alias="redis", prefix="")


# -- unique keys -----------------------------------------------------------------


def test_unique_key_is_free_while_its_job_runs_and_kept_on_release(store):
    first = store.push([new(key="k")])[0]
    claim = store.claim(["default"], "w")[0]
    assert claim.id == first and claim.unique_key == "k"
    # Running does not hold the key: a new push with it is stored.
    second = store.push([new(key="k")])[0]
    assert second
    # The released job finds the key taken: it goes back without it, no error.
    assert store.release(claim, timezone.now(), "boom")
    assert store.push([new(key="k")]) == [None]
    ids = sorted(c.id for c in store.claim(["default"], "w", limit=5))
    assert ids == [first, second]


def test_a_cleared_job_frees_its_unique_key(store):
    store.push([new(key="k")])
    assert store.clear() == 1
    assert store.push([new(key="k")])[0] is not None


# -- transactions: pushes wait for the commit ------------------------------------


def test_push_outside_a_transaction_is_immediate(store):
    pushed = jobs.record.push("now")
    assert pushed.status == "queued" and isinstance(pushed.id, int)
    assert store.counts()["default"].pending == 1


def test_push_in_a_transaction_waits_for_the_commit(store):
    seen_inside = []
    with transaction.atomic():
        pushed = jobs.record.push("later")
        # Another connection to Redis sees nothing until the commit.
        seen_inside.append(store.counts().get("default"))
    assert pushed.status == "queued" and pushed.id is None
    assert seen_inside == [None]
    claim = store.claim(["default"], "w")[0]
    assert claim.payload == '{"args":["later"],"kwargs":{}}'


def test_push_in_a_rolled_back_transaction_is_dropped(store):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.record.push_many([("a",), ("b",)])
        raise RuntimeError("rollback")
    assert store.counts() == {}


# -- blocking wait -----------------------------------------------------------------


def _waiter(store: RedisStore, queues: list[str], timeout: float, stop: threading.Event):
    done: dict[str, float] = {}

    def wait() -> None:
        started = time.monotonic()
        store.wait(queues, timeout, stop)
        done["after"] = time.monotonic() - started

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, done


def test_wait_returns_when_a_job_is_pushed(store):
    stop = threading.Event()
    thread, done = _waiter(store, ["mail", "default"], 60, stop)
    time.sleep(0.3)
    assert thread.is_alive()  # blocked, not polling its way out
    store.push([new()])
    thread.join(30)
    stop.set()
    assert not thread.is_alive() and done["after"] < 30


def test_a_waiting_worker_runs_a_delayed_job_when_it_falls_due(store):
    store.push([new(at=timezone.now() + timedelta(seconds=0.5))])
    stop = threading.Event()
    waits = 0
    deadline = time.monotonic() + 30
    # The worker's loop: claim, and wait (up to 60 s each time) while nothing is due.
    while not (claims := store.claim(["default"], "w")) and time.monotonic() < deadline:
        store.wait(["default"], 60, stop)
        waits += 1
    assert len(claims) == 1
    # Woken by its push, then by the due time: a few waits, never a busy loop.
    assert 1 <= waits <= 5


def test_wait_returns_when_stopped(store):
    stop = threading.Event()
    thread, done = _waiter(store, ["default"], 60, stop)
    time.sleep(0.2)
    stop.set()
    thread.join(30)
    assert not thread.is_alive() and done["after"] < 30


def test_wait_ends_after_its_timeout(store):
    started = time.monotonic()
    store.wait(["default"], 0.2, threading.Event())
    assert time.monotonic() - started >= 0.19


def test_wait_and_claim_wakes_with_the_pushed_job_claimed(store):
    stop = threading.Event()
    got: list = []
    thread = threading.Thread(
        target=lambda: got.extend(store.wait_and_claim(
            ["mail", "default"], "w", 1, 60, stop, fresh_within=60)))
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()  # blocked, not polling its way out
    store.push([new(value="woken")])
    thread.join(30)
    stop.set()
    assert not thread.is_alive()
    (claim,) = got
    assert claim.payload == '{"args":["woken"],"kwargs":{}}' and claim.attempts == 1
    assert store.counts()["default"].running == 1
    assert store.delete([claim]) == 1


def test_wait_and_claim_takes_a_due_job_that_woke_nobody(store):
    store.push([new(value="quiet")])
    store.client.delete(store.key("queue", "default", "wake"))
    # Nothing to pop: the claim behind the pop finds the job when the pop times out.
    (claim,) = store.wait_and_claim(["default"], "w", 1, 60, threading.Event(),
                                    fresh_within=0.1)
    assert claim.payload == '{"args":["quiet"],"kwargs":{}}'


def test_wait_and_claim_claims_nothing_once_stopped(store):
    stop = threading.Event()
    stop.set()
    store.push([new()])
    assert store.wait_and_claim(["default"], "w", 1, 60, stop, fresh_within=1) == []
    assert store.counts()["default"].waiting == 1


# -- the failed list: database row first, then Redis ------------------------------


def test_fail_after_the_claim_was_lost_writes_nothing(store):
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    assert expire_claims(store) == 1
    assert store.fail(claim, "too late") is None
    assert FailedJob.objects.count() == 0
    assert store.counts()["default"].pending == 1


def test_crash_between_row_and_removal_is_finished_by_requeue(store):
    """The row was written, the worker died before removing the job from Redis: the
    job must not run again, and the failed list keeps exactly one row."""
    job_id = store.push([new()])[0]
    claim = store.claim(["default"], "w")[0]
    # fail()'s first two steps, then the process "dies".
    assert store._run("MARK_FAILING", [claim.id, claim.token]) == 1
    FailedJob.objects.create(
        job_id=job_id, name=claim.name, queue=claim.queue, payload=claim.payload,
        attempts=claim.attempts, pushed_at=claim.pushed_at, failed_at=timezone.now(),
        error="Fail: gone",
    )
    assert store.counts()["default"].reserved == 1
    assert expire_claims(store) == 0  # finished, not requeued
    assert store.claim(["default"], "w") == []
    assert "default" not in {q for q, c in store.counts().items() if c.total}
    assert FailedJob.objects.count() == 1
    # Safe to repeat.
    assert expire_claims(store) == 0 and FailedJob.objects.count() == 1


def test_crash_before_the_row_returns_the_job_to_its_queue(store):
    """Marked but no row (the database write never happened): nothing is lost."""
    job_id = store.push([new()])[0]
    claim = store.claim(["default"], "w")[0]
    assert store._run("MARK_FAILING", [claim.id, claim.token]) == 1
    assert expire_claims(store) == 1
    again = store.claim(["default"], "w")[0]
    assert again.id == job_id and again.attempts == 2 and again.last_error == "worker lost"
    assert store.fail(again, "Fail: now for real") is not None
    assert FailedJob.objects.get().attempts == 2


def _fail_with_requeue_during(signal, store: RedisStore, claim) -> int | None:
    def requeue_meanwhile(sender, instance, **kwargs):
        expire_claims(store)

    signal.connect(requeue_meanwhile, sender=FailedJob, dispatch_uid="requeue-meanwhile")
    try:
        return store.fail(claim, "Fail: raced")
    finally:
        signal.disconnect(sender=FailedJob, dispatch_uid="requeue-meanwhile")


def test_fail_whose_claim_is_requeued_before_its_row_takes_the_row_back(store):
    """The claim expires before the row is written: the job goes back to its queue to
    run again, so the row goes and fail() reports the claim lost."""
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    assert _fail_with_requeue_during(pre_save, store, claim) is None
    assert FailedJob.objects.count() == 0
    assert store.counts()["default"].pending == 1


def test_fail_whose_claim_is_requeued_after_its_row_stays_failed(store):
    """The claim expires after the row is written: the requeue finishes the move."""
    store.push([new()])
    claim = store.claim(["default"], "w")[0]
    failed_id = _fail_with_requeue_during(post_save, store, claim)
    assert failed_id == FailedJob.objects.get().pk
    assert store.counts() == {"default": store.counts()["default"]}
    assert store.counts()["default"].total == 0


def test_fail_keeps_what_the_failed_list_needs(store):
    store.push([new(key="k")])
    claim = store.claim(["default"], "w")[0]
    failed_id = store.fail(claim, "Fail: no")
    row = FailedJob.objects.get(pk=failed_id)
    assert (row.job_id, row.name, row.unique_key, row.attempts, row.pushed_at) == (
        claim.id, "tests.record", "k", 1, claim.pushed_at)
    assert store.retry([failed_id]) == 1
    assert store.claim(["default"], "w")[0].unique_key == "k"


# -- several clients at once -------------------------------------------------------


def test_claims_from_many_threads_and_connections_never_overlap(store):
    store.push([new(value=str(i)) for i in range(600)])
    seen: list[int] = []
    lock = threading.Lock()

    def drain() -> None:
        # Each thread its own store object: its own scripts and connections.
        mine = RedisStore(database="default", alias="redis", prefix=PREFIX)
        try:
            while claims := mine.claim(["default"], threading.current_thread().name, 7):
                with lock:
                    seen.extend(c.id for c in claims)
                mine.delete(claims)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=drain) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 600 == len(set(seen))
    assert store.counts() == {}


def test_a_big_push_many_is_chunked_but_keeps_order(store):
    ids = store.push([new(value=str(i), key=f"k{i % 3000}") for i in range(4500)])
    assert ids[3000:] == [None] * 1500
    assert ids[:3000] == sorted(ids[:3000]) and None not in ids[:3000]
    assert store.counts()["default"].pending == 3000
    first = store.claim(["default"], "w", limit=3)
    assert [c.id for c in first] == ids[:3]


def test_get_store_builds_the_redis_store(store):
    built = get_store()
    assert isinstance(built, RedisStore)
    assert (built.alias, built.prefix) == ("redis", PREFIX)
