"""The Redis store's quiet look (stores/redis/wait.py) and the long pop of a quiet worker: what
keeps a worker from being quiet, the claim that wakes quiet workers, a claim dated
when its pop returns, and a pop longer than the client's socket timeout."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from laterite_django.models import OutboxJob
from laterite_django.stores.redis import RedisStore
from laterite_django.stores.redis.values import us
from tests.conftest import redis_store_only
from tests.testapp import jobs

PREFIX = f"laterite-test-quiet-{os.getpid()}"


@pytest.fixture
def store_kind() -> Iterator[str]:
    with redis_store_only(PREFIX) as kind:
        yield kind


@pytest.fixture
def redis(store) -> RedisStore:
    assert isinstance(store, RedisStore)
    yield store
    store.quiet_state.end()  # this thread's spell must not reach the next test


def look(store: RedisStore, queues=("default",), worker="w") -> bool:
    return store._waiting.look(list(queues), worker, us(timezone.now()))


def test_nothing_waiting_or_claimed_is_quiet_until_the_next_delayed_job(redis):
    assert look(redis)
    assert 299 < redis.quiet_state.until() - time.time() <= 300
    redis.quiet_state.end()
    jobs.record.push_in(timedelta(seconds=20), "later")
    assert look(redis)
    assert 18 < redis.quiet_state.until() - time.time() <= 20
    assert redis.quiet()


@pytest.mark.parametrize("what", ["due", "claimed elsewhere", "outbox row"])
def test_work_for_a_claim_or_a_sweep_is_not_quiet(redis, what):
    if what == "due":
        jobs.record.push("due")
    elif what == "claimed elsewhere":
        jobs.record.enqueue(["held"], {}, queue="mail")
        assert redis.claim(["mail"], "elsewhere")
    else:
        now = timezone.now()
        OutboxJob.objects.create(name="tests.record", queue="default", payload="{}",
                                 priority=0, pushed_at=now, available_at=now)
    assert not look(redis)
    assert not redis.quiet()


def test_a_job_due_on_another_queue_is_its_own_workers_business(redis):
    jobs.record.enqueue(["other"], {}, queue="mail")
    assert look(redis, ["default"])
    assert not look(redis, ["mail"], worker="m")


def test_a_claim_anywhere_wakes_every_quiet_worker_once(redis):
    assert look(redis, ["default"], worker="a")
    assert look(redis, ["default"], worker="b")
    client = redis.client
    jobs.record.enqueue(["x"], {}, queue="mail")
    claims = redis.claim(["mail"], "elsewhere")
    assert claims
    for worker in ("a", "b"):
        assert client.lrange(redis._waiting.own_key(worker), 0, -1) == [b"1"]
        assert 0 < client.ttl(redis._waiting.own_key(worker)) <= 600
    assert not client.exists(redis.key("quiet"))
    # Once the job is settled, its next look starts from an empty list: the token
    # was for a wake-up before it.
    assert redis.delete(claims) == 1
    assert look(redis, ["default"], worker="a")
    assert client.llen(redis._waiting.own_key("a")) == 0


def _wait_quiet(redis: RedisStore, stop: threading.Event, out: list, seconds: float = 10):
    """Look, then wait as an idle worker does, in a thread of its own: quiet, its
    wait is one pop with a claim behind it."""
    def run() -> None:
        try:
            assert look(redis)
            out.extend(redis.wait_and_claim(["default"], "w", 1, 0.05, stop,
                                            fresh_within=0.3, longest=seconds))
        finally:
            connections.close_all()  # this thread's own (the look reads the outbox)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _blocked(redis: RedisStore) -> bool:
    return redis.client.info("clients")["blocked_clients"] >= 1


def test_a_claim_behind_a_long_pop_is_dated_when_the_pop_returns(redis):
    """Dated when sent, a claim that waited 2 s would look 2 s old to every sweep;
    a worker blocked longer than retry_after would lose it at once."""
    stop = threading.Event()
    out: list = []
    thread = _wait_quiet(redis, stop, out)
    time.sleep(2.0)
    assert _blocked(redis)
    pushed = us(timezone.now())
    jobs.record.push("woken")
    thread.join(10)
    assert not thread.is_alive()
    [claim] = out
    claimed_at = int(redis.client.hget(redis.key("job", str(claim.id)), "claimed_at"))
    assert claimed_at >= pushed - 50_000  # the server's clock and this one agree here
    assert not redis.quiet_state.until()


def test_a_quiet_pop_outlasts_the_clients_socket_timeout_and_ends_at_a_stop(redis):
    client = redis.client
    pool = client.connection_pool
    pool.disconnect()
    before = pool.connection_kwargs.get("socket_timeout")
    pool.connection_kwargs["socket_timeout"] = 1.0
    try:
        stop = threading.Event()
        out: list = []
        thread = _wait_quiet(redis, stop, out, seconds=30)
        time.sleep(3.5)  # three times the socket timeout, blocked all along
        assert thread.is_alive() and _blocked(redis)
        started = time.monotonic()
        stop.set()
        thread.join(10)
        assert not thread.is_alive()
        assert time.monotonic() - started < 3
        assert out == []
    finally:
        pool.connection_kwargs["socket_timeout"] = before
        if before is None:
            del pool.connection_kwargs["socket_timeout"]
        pool.disconnect()
