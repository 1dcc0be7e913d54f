"""What the Redis store asks of its server: the commands of a push, of a claim, of a
wait, counted by a private `redis-server` (the shared one on 6379 serves other
clients too), and scripts the server forgot (a restart, SCRIPT FLUSH)."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connections
from django.utils import timezone

from laterite_django import chain
from laterite_django.stores import NewJob, get_store
from laterite_django.stores.redis import RedisStore
from laterite_django.testing import run_jobs
from laterite_django.worker.loop import Worker
from tests.conftest import redis_store_only, wait_for
from tests.testapp import jobs
from tests.testapp.models import Record
from tests.worker.test_redis_worker import own_redis

__all__ = ["own_redis"]

PREFIX = f"laterite-test-rtrips-{os.getpid()}"
# Commands that only read the counts, or reset them.
_BOOKKEEPING = {"info", "config|resetstat"}


@pytest.fixture
def store_kind() -> Iterator[str]:
    with redis_store_only(PREFIX) as kind:
        yield kind


@pytest.fixture
def private(store_kind, own_redis):
    """The Redis store on a private server, and a client of that server's own."""
    server = own_redis()
    store = get_store()
    assert isinstance(store, RedisStore)
    store.ping()  # the store's connection is made before anything is counted
    return store, server.client()


def commands(admin) -> Counter:
    """The commands the server ran since the last reset, scripts' own calls included."""
    counts = Counter()
    for name, stats in admin.info("commandstats").items():
        command = name.removeprefix("cmdstat_")
        if command not in _BOOKKEEPING:
            counts[command] = stats["calls"]
    admin.config_resetstat()
    return counts


def new(value: str = "x") -> NewJob:
    now = timezone.now()
    return NewJob(name="tests.record", queue="default", payload=f'{{"args":["{value}"],'
                  f'"kwargs":{{}}}}', available_at=now, pushed_at=now)


def test_a_push_is_one_script_call_and_nothing_else(private):
    store, admin = private
    jobs.record.push("first")  # the first push loads the script
    commands(admin)
    jobs.record.push("second")
    # One round trip (EVALSHA); in it, one write per key the job lives in, the check
    # that its new id is free, the server's clock (its due time) and the note of its
    # sender's last push (redis_resend).
    assert commands(admin) == Counter({"evalsha": 1, "incr": 1, "exists": 1, "time": 1,
                                       "hset": 1, "zadd": 1, "sadd": 1, "rpush": 1,
                                       "set": 1})
    assert store.counts()["default"].waiting == 2


def test_settling_and_claiming_is_one_round_trip(private):
    store, admin = private
    store.push([new("a"), new("b"), new("c")])
    # The first settle_and_claim loads the DELETE script.
    (first,) = store.settle_and_claim(store.claim(["default"], "w"), ["default"], "w")
    commands(admin)
    (second,) = store.settle_and_claim([first], ["default"], "w")
    ran = commands(admin)
    # DELETE and CLAIM in one pipeline, without asking SCRIPT EXISTS first.
    assert ran["evalsha"] == 2
    assert not [command for command in ran if command.startswith("script")]
    assert second.payload == '{"args":["c"],"kwargs":{}}'


def test_scripts_the_server_forgot_are_loaded_again(private):
    store, admin = private
    store.push([new("a"), new("b"), new("c")])
    admin.script_flush()
    assert store.push([new("d")]) != [None]
    admin.script_flush()
    (claim,) = store.claim(["default"], "w")
    admin.script_flush()
    # In a pipeline: DELETE and CLAIM both refused, then each run on its own, in order.
    (after,) = store.settle_and_claim([claim], ["default"], "w")
    assert {claim.payload, after.payload} == {'{"args":["a"],"kwargs":{}}',
                                              '{"args":["b"],"kwargs":{}}'}
    admin.script_flush()
    # A push bigger than one script call: several calls, one after the other.
    ids = store.push([new(str(i)) for i in range(2001)])
    assert len(ids) == 2001 and None not in ids
    assert store.counts()["default"].waiting == 2 + 2001  # c, d and the big push
    assert store.counts()["default"].running == 1


def test_a_finished_link_on_a_server_that_forgot_finish_hands_over_the_next(private):
    store, admin = private
    chain(jobs.step.call("a"), jobs.step.call("b")).push()
    (first,) = store.claim(["default"], "w")
    admin.script_flush()
    store.claim(["default"], "w")  # CLAIM is loaded again, FINISH is not
    # FINISH is refused in the pipeline and runs after the CLAIM behind it, which
    # found nothing: the claim is made again, and takes the link FINISH pushed.
    claims = store.settle_and_claim([first], ["default"], "w")
    assert [c.payload for c in claims] == ['{"args":["b"],"kwargs":{}}']


def test_run_jobs_runs_a_whole_chain_on_a_server_that_forgot_its_scripts(private):
    _, admin = private
    chain(jobs.step.call("a"), jobs.step.call("b"), jobs.step.call("c")).push()
    admin.script_flush()
    run_jobs()
    assert list(Record.objects.filter(kind="step").order_by("id").values_list(
        "value", flat=True)) == ["a", "b", "c"]


def test_a_push_after_the_server_dropped_the_connection_is_stored_once(private):
    store, admin = private
    jobs.record.push("before")
    # The server ends every client's connection (a restart, a timeout, CLIENT KILL): the
    # pooled connection the next push takes is dead, and the push is made on a new one.
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    assert jobs.record.push("after").status == "queued"
    assert store.counts()["default"].waiting == 2
    payloads = sorted(claim.payload for claim in store.claim(["default"], "w", limit=5))
    assert payloads == ['{"args":["after"],"kwargs":{}}', '{"args":["before"],"kwargs":{}}']


def test_a_push_whose_connection_breaks_as_it_is_sent_is_made_again(private, monkeypatch):
    from redis.connection import Connection
    from redis.exceptions import ConnectionError as RedisConnectionError

    store, _ = private
    jobs.record.push("first")  # the script is loaded
    real_send, broken = Connection.send_packed_command, []

    def send_packed_command(connection, *args, **kwargs):
        if not broken:  # the first send after this: the socket fails before it is sent
            broken.append(connection)
            raise RedisConnectionError("Connection reset by peer (injected)")
        return real_send(connection, *args, **kwargs)

    monkeypatch.setattr(Connection, "send_packed_command", send_packed_command)
    assert jobs.record.push("second").status == "queued"
    assert broken  # the failure happened, and execute_command sent it again
    assert store.counts()["default"].waiting == 2


def test_lone_calls_keep_one_connection_in_the_main_thread_and_borrow_in_others(private):
    store, admin = private
    pool = store.client.connection_pool
    for value in "abc":
        jobs.record.push(value)
    admin.script_flush()  # a refused call, loaded and run again
    jobs.record.push("d")
    assert store.claim(["default"], "w", limit=4)
    # The main thread keeps one connection (redis-py keeps no public count of them).
    assert len(pool._in_use_connections) == 1
    # This client's, the kept one, and the pool's (the script was loaded on one).
    assert admin.info("clients")["connected_clients"] <= 4

    def push_from_threads() -> None:
        for value in "ef":
            jobs.record.push(value)

    threads = [threading.Thread(target=push_from_threads) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    # Other threads (a web server's, perhaps short-lived) give theirs back.
    assert len(pool._in_use_connections) == 1
    assert store.counts()["default"].waiting == 4 + 8 - 4


def test_a_lone_call_stopped_before_its_answer_leaves_no_answer_behind(private, monkeypatch):
    from redis.connection import Connection

    store, _ = private
    jobs.record.push("first")  # the script is loaded, the connection kept
    real_read, stopped = Connection.read_response, []

    def read_response(connection, *args, **kwargs):
        if not stopped:  # a signal's exception lands while the answer is on its way
            stopped.append(connection)
            raise KeyboardInterrupt
        return real_read(connection, *args, **kwargs)

    monkeypatch.setattr(Connection, "read_response", read_response)
    with pytest.raises(KeyboardInterrupt):
        jobs.record.push("second")
    monkeypatch.setattr(Connection, "read_response", real_read)
    # The kept connection was closed: the next call does not read the second push's
    # answer as its own.
    third = jobs.record.push("third")
    assert third.status == "queued"
    payloads = {claim.id: claim.payload for claim in store.claim(["default"], "w", limit=5)}
    assert len(payloads) == 3  # the second push was made: only its answer was lost
    assert payloads[third.id] == '{"args":["third"],"kwargs":{}}'


def test_a_worker_stopped_while_it_waits_leaves_the_job_pushed_then_unstarted(private):
    store, admin = private
    worker = Worker(["default"], store=store, sleep=60, manage_connections=False)

    def work() -> None:
        try:
            worker.run()
        finally:
            connections.close_all()  # this thread's own (its sweep reads the outbox)

    thread = threading.Thread(target=work)
    thread.start()
    try:
        # Blocked on the wake-up list, its claim queued behind the pop.
        wait_for(lambda: admin.info("clients")["blocked_clients"] == 1, timeout=30)
        worker.stop()
        jobs.record.push("too late")
        thread.join(30)
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert worker.processed == 0
    # Claimed by the pop's claim or not, it waits again with no attempt counted.
    (claim,) = store.claim(["default"], "other")
    assert claim.attempts == 1 and claim.payload == '{"args":["too late"],"kwargs":{}}'


def test_calls_sent_together_keep_the_main_threads_connection(private):
    store, _ = private
    store.push([new("a"), new("b"), new("c")])
    (first,) = store.claim(["default"], "w")
    pool = store.client.connection_pool
    kept = len(pool._in_use_connections)
    for _ in range(2):
        (first,) = store.settle_and_claim([first], ["default"], "w")
    assert len(pool._in_use_connections) == kept == 1
    assert first.payload == '{"args":["c"],"kwargs":{}}'


def test_calls_sent_together_after_the_server_dropped_the_connection_are_made_again(private):
    store, admin = private
    store.push([new("a"), new("b")])
    (first,) = store.claim(["default"], "w")  # the main thread's connection is kept
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    # The kept connection is dead: the DELETE and the CLAIM go again, on a new one.
    (second,) = store.settle_and_claim([first], ["default"], "w")
    assert second.payload == '{"args":["b"],"kwargs":{}}'
    assert store.counts()["default"].waiting == 0
    assert store.counts()["default"].running == 1  # the first was deleted


def test_calls_sent_together_and_stopped_before_their_answers_leave_none_behind(
        private, monkeypatch):
    from redis.connection import Connection

    store, _ = private
    store.push([new("a"), new("b"), new("c"), new("d")])
    # The DELETE and CLAIM scripts are loaded: each call's first answer is its own.
    (first,) = store.settle_and_claim(store.claim(["default"], "w"), ["default"], "w")
    real_read, stopped = Connection.read_response, []

    def read_response(connection, *args, **kwargs):
        if not stopped:  # a signal's exception lands between the two answers
            stopped.append(connection)
            answer = real_read(connection, *args, **kwargs)
            raise KeyboardInterrupt(answer)
        return real_read(connection, *args, **kwargs)

    monkeypatch.setattr(Connection, "read_response", read_response)
    with pytest.raises(KeyboardInterrupt):
        store.settle_and_claim([first], ["default"], "w")
    monkeypatch.setattr(Connection, "read_response", real_read)
    # The connection was closed with the CLAIM's answer unread: the next call reads
    # its own answers, not that one.
    (fourth,) = store.claim(["default"], "w")
    assert fourth.payload == '{"args":["d"],"kwargs":{}}'
    # b was deleted; c was claimed by the lost answer (it comes back after
    # retry_after, its attempt counted, as any claim whose worker died).
    assert store.counts()["default"].running == 2


def test_an_error_answer_among_calls_sent_together_is_raised_after_all_are_read(private):
    from redis.exceptions import ResponseError

    from laterite_django.stores.redis import scripts as redis_calls

    store, _ = private
    store.push([new("a")])
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        redis_calls.finish(store.client, redis_calls.together(store.client, [
            ("SET", f"{PREFIX}:plain", "x"), ("LPUSH", f"{PREFIX}:plain", "y"),
            ("EVALSHA", redis_calls.SHAS["claim"], 0, "no-prefix")]), {})
    # Every answer was read: the connection serves the next call.
    (claim,) = store.claim(["default"], "w")
    assert claim.payload == '{"args":["a"],"kwargs":{}}'
