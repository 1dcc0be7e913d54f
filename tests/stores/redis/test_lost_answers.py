"""A Redis push or claim whose answer is lost after the server ran it (the connection
breaks between the two) is made again, by the store or by redis-py's own retry: a
push stores each job once all the same, and a claim answers with the jobs it took,
not more (those would wait, held, until their claim was found abandoned). Through
a proxy to the test Redis that drops one answer."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from laterite_django import job
from laterite_django.exceptions import PushNotReplicated
from laterite_django.registry import registry
from laterite_django.stores import get_store, reset_store
from laterite_django.stores.redis import RedisStore
from laterite_django.stores.redis.resend import next_push
from laterite_django.stores.redis.values import PUSH_CHUNK, us
from tests.conftest import redis_store_only
from tests.stores.redis.proxy import AnswerDropper
from tests.testapp import jobs

PREFIX = f"laterite-test-lost-{os.getpid()}"


@pytest.fixture
def store_kind() -> Iterator[str]:
    with redis_store_only(PREFIX) as kind:
        yield kind


@pytest.fixture
def lossy(store_kind: str, transactional_db: None) -> Iterator[tuple[RedisStore, AnswerDropper]]:
    """The Redis store reached through an AnswerDropper."""
    dropper = AnswerDropper(settings.CACHES["redis"]["LOCATION"])
    caches = {**settings.CACHES, "redis": {**settings.CACHES["redis"], "LOCATION": dropper.url}}
    override = override_settings(CACHES=caches)
    override.enable()
    reset_store()
    try:
        store = get_store()
        assert isinstance(store, RedisStore)
        store.ping()
        yield store, dropper
    finally:
        override.disable()
        reset_store()
        dropper.close()


def stored(store: RedisStore) -> list[tuple[int, str]]:
    """(id, payload) of every waiting job, claimed."""
    return sorted((claim.id, claim.payload) for claim in store.claim(
        ["default"], "w", limit=PUSH_CHUNK * 2))


def payload(value: str) -> str:
    return f'{{"args":["{value}"],"kwargs":{{}}}}'


def test_a_lone_push_whose_answer_is_lost_is_stored_once(lossy):
    store, dropper = lossy
    dropper.drop_answer_to(b"EVALSHA")
    pushed = jobs.record.push("lone")
    assert dropper.dropped == 1
    assert stored(store) == [(pushed.id, payload("lone"))]


def test_a_push_of_several_jobs_whose_answer_is_lost_stores_each_once(lossy):
    store, dropper = lossy
    dropper.drop_answer_to(b"EVALSHA")
    pushed = jobs.record.push_many([("a",), ("b",), ("c",)])
    assert dropper.dropped == 1
    assert stored(store) == sorted(
        (result.id, payload(value)) for result, value in zip(pushed, "abc", strict=True))


def test_a_unique_push_whose_answer_is_lost_is_not_taken_for_its_own_duplicate(lossy):
    store, dropper = lossy
    dropper.drop_answer_to(b"EVALSHA")
    pushed = jobs.unique.push(5)
    assert dropper.dropped == 1
    assert pushed.status == "queued"
    assert [job_id for job_id, _ in stored(store)] == [pushed.id]


def test_a_limited_push_whose_answer_is_lost_is_stored_once(lossy):
    store, dropper = lossy

    @job("tests.lost_keyed", concurrency=1, concurrency_key=lambda n: f"n:{n}")
    def keyed(n: int) -> None: ...

    try:
        dropper.drop_answer_to(b"EVALSHA")
        pushed = keyed.push(3)
        assert dropper.dropped == 1
        assert [job_id for job_id, _ in stored(store)] == [pushed.id]
    finally:
        registry.unregister("tests.lost_keyed")


def test_a_push_of_more_than_a_chunk_whose_first_answer_is_lost_stores_each_once(lossy):
    store, dropper = lossy
    values = [str(i) for i in range(PUSH_CHUNK + 5)]
    dropper.drop_answer_to(b"EVALSHA")
    pushed = jobs.record.push_many([(value,) for value in values])
    assert dropper.dropped == 1
    assert stored(store) == sorted(
        (result.id, payload(value)) for result, value in zip(pushed, values, strict=True))


def test_a_replicated_push_whose_answer_is_lost_is_stored_once(lossy):
    """With LATERITE_QUEUE_REDIS_WAIT the push and its WAIT go in one pipeline, which
    redis-py sends again whole (no replica here: the push is not confirmed)."""
    store, dropper = lossy
    dropper.drop_answer_to(b"EVALSHA")
    with override_settings(LATERITE_QUEUE_REDIS_WAIT=0.05), pytest.raises(
            PushNotReplicated) as raised:
        jobs.record.push_many([("a",), ("b",)])
    assert dropper.dropped == 1
    assert stored(store) == sorted(
        (job_id, payload(value)) for job_id, value in zip(raised.value.ids, "ab", strict=True))


def test_each_thread_and_each_forked_child_is_a_sender_of_its_own():
    """A sender's pushes are numbered one after the other; two threads, or a parent and
    the child it forked, must not share a name, or one's push could be taken for the
    other's."""
    name, first = next_push()
    assert next_push() == (name, str(int(first) + 1))
    other: list[tuple[str, str]] = []
    thread = threading.Thread(target=lambda: other.append(next_push()))
    thread.start()
    thread.join()
    assert other[0][0] != name
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, next_push()[0].encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    os.close(write)
    assert child and child not in (name, other[0][0])
    assert next_push()[0] == name


def four_pushed() -> list[str]:
    """Four jobs pushed in order; their payloads."""
    jobs.record.push_many([(value,) for value in "abcd"])
    return [payload(value) for value in "abcd"]


def test_a_claim_whose_answer_is_lost_gives_the_jobs_it_took(lossy):
    store, dropper = lossy
    waiting = four_pushed()
    dropper.drop_answer_to(b"EVALSHA")
    claims = store.claim(["default"], "w", limit=2)
    assert dropper.dropped == 1
    assert [claim.payload for claim in claims] == waiting[:2]
    assert [claim.position for claim in claims] == [0, 1]
    assert store.heartbeat(claims) == 2  # held under the token they came with
    assert [claim.payload for claim in store.claim(["default"], "w", limit=10)] == waiting[2:]


def test_a_limited_claim_whose_answer_is_lost_gives_the_jobs_it_took(lossy):
    store, dropper = lossy
    waiting = four_pushed()
    with override_settings(LATERITE_QUEUE_LIMITS={"default": {"concurrency": 3}}):
        dropper.drop_answer_to(b"EVALSHA")
        claims = store.claim(["default"], "w", limit=2)
        assert dropper.dropped == 1
        assert [claim.payload for claim in claims] == waiting[:2]
        # Two of three run: room for one more.
        assert [claim.payload for claim in store.claim(["default"], "w", limit=10)] == [
            waiting[2]]


def test_a_settle_and_claim_whose_answer_is_lost_gives_the_jobs_it_took(lossy):
    """The deletion of the finished job and the next claim go in one packet, sent
    again whole."""
    store, dropper = lossy
    waiting = four_pushed()
    finished = store.claim(["default"], "w", limit=1)
    dropper.drop_answer_to(b"EVALSHA")
    claims = store.settle_and_claim(finished, ["default"], "w", limit=2)
    assert dropper.dropped == 1
    assert [claim.payload for claim in claims] == waiting[1:3]
    assert store.heartbeat(finished) == 0  # deleted
    assert [claim.payload for claim in store.claim(["default"], "w", limit=10)] == waiting[3:]


def test_a_claim_behind_a_pop_whose_answer_is_lost_gives_the_jobs_it_took(lossy):
    """A woken worker's blocking pop and the claim behind it, in one packet."""
    store, dropper = lossy
    waiting = four_pushed()
    dropper.drop_answer_to(b"EVALSHA")
    claims = store.wait_and_claim(["default"], "w", 2, 1.0, threading.Event(),
                                  fresh_within=1.0)
    assert dropper.dropped == 1
    assert [claim.payload for claim in claims] == waiting[:2]
    assert [claim.payload for claim in store.claim(["default"], "w", limit=10)] == waiting[2:]


def test_a_claim_behind_a_quiet_workers_long_pop_whose_answer_is_lost_gives_the_jobs_it_took(
        lossy):
    """A quiet worker's pop (longer than a second, on a connection of its own) and the
    claim behind it: woken by a push, the claim runs, its answer is lost, and the
    claim is sent again rather than the jobs left held until their claim expires."""
    store, dropper = lossy
    assert store._waiting.look(["default"], "w", us(timezone.now()))
    assert store.quiet()
    pushed: list[list[str]] = []
    pusher = threading.Timer(0.5, lambda: pushed.append(four_pushed()))
    dropper.drop_answer_to(b"BLPOP")  # the pop's packet: the push holds no BLPOP
    pusher.start()
    claims = store.wait_and_claim(["default"], "w", 2, 0.05, threading.Event(),
                                  fresh_within=1.0, longest=10.0)
    pusher.join()
    assert dropper.dropped == 1
    [waiting] = pushed
    assert [claim.payload for claim in claims] == waiting[:2]
    assert store.heartbeat(claims) == 2  # held under the token they came with
    assert not store.quiet()  # woken: it looks again
    assert [claim.payload for claim in store.claim(["default"], "w", limit=10)] == waiting[2:]
