"""How the Redis store packs its commands (redis_calls._packed): byte for byte as
redis-py would, on a real connection to the test server, with redis-py's own
errors for what it refuses; and a push whose arguments hiredis packs arrives whole."""

from __future__ import annotations

import os

import pytest
import redis
from django.utils import timezone
from redis.exceptions import DataError

from laterite_django.stores import NewJob, get_store
from laterite_django.stores.redis.scripts import _packed, borrow
from tests.conftest import redis_store_only
from tests.settings import REDIS_URL

PREFIX = f"laterite-test-packing-{os.getpid()}"


def _connection(**options):
    """A connection of a new client of the test Redis, and a function that closes both."""
    client = redis.Redis.from_url(REDIS_URL, **options)
    connection = borrow(client.connection_pool)

    def close() -> None:
        client.connection_pool.release(connection)
        client.close()

    return connection, close


@pytest.fixture
def connection():
    connection, close = _connection()
    yield connection
    close()


@pytest.mark.parametrize("command", [
    ("EVALSHA", "a" * 40, 0, "prefix", "1765000000000000", "app.jobs.send", "default"),
    ("SET", "k", '{"args": ["caf\u00e9 \u2603 \U0001f600"], "kwargs": {}}'),
    ("SET", "k", b"\xff\x00 bytes"),
    ("ZADD", "k", -3, "m", 2 ** 70, "n", 1.5, "o", 1e20, "p", float("inf"), "q"),
    ("SET", "k", ""),
])
def test_a_command_is_packed_as_redis_py_packs_it(connection, command):
    assert _packed(connection, command) == b"".join(connection.pack_command(*command))


@pytest.mark.parametrize("value", [None, True])
def test_a_value_redis_py_refuses_is_refused_with_its_error(connection, value):
    with pytest.raises(DataError, match=type(value).__name__):
        _packed(connection, ("SET", "k", value))


def test_a_name_with_a_space_is_split_as_redis_py_splits_it(connection):
    packed = _packed(connection, ("SCRIPT LOAD", "return 1"))
    assert packed == b"".join(connection.pack_command("SCRIPT", "LOAD", "return 1"))
    assert packed.startswith(b"*3\r\n")


def test_a_text_that_is_not_utf8_is_refused_as_redis_py_refuses_it(connection):
    with pytest.raises(UnicodeEncodeError):
        _packed(connection, ("SET", "k", "\ud800"))


def test_a_client_of_another_encoding_is_packed_in_that_encoding():
    connection, close = _connection(encoding="latin-1")
    try:
        assert _packed(connection, ("SET", "k", "caf\u00e9")).endswith(b"caf\xe9\r\n")
    finally:
        close()


def test_a_pushed_job_keeps_every_character_of_its_fields(transactional_db):
    payload = '{"args": ["caf\u00e9 \u2603 \U0001f600", 12], "kwargs": {"n": -1.5}}'
    with redis_store_only(PREFIX):
        store = get_store()
        now = timezone.now()
        job_id = store.push([NewJob(name="tests.r\u00e9cord", queue="d\u00e9faut",
                                    payload=payload, available_at=now, pushed_at=now)])[0]
        (claim,) = store.claim(["d\u00e9faut"], worker="w", limit=1)
        assert (claim.id, claim.name, claim.queue, claim.payload) == (
            job_id, "tests.r\u00e9cord", "d\u00e9faut", payload)


def test_calls_sent_together_go_in_one_buffer(connection, monkeypatch):
    from redis.connection import Connection

    from laterite_django.stores.redis.scripts import together

    client = redis.Redis.from_url(REDIS_URL)
    client.ping()  # connected first: the handshake's own commands are not counted
    real_send, sent = Connection.send_packed_command, []

    def send_packed_command(self, command, *args, **kwargs):
        sent.append(list(command))
        return real_send(self, command, *args, **kwargs)

    monkeypatch.setattr(Connection, "send_packed_command", send_packed_command)
    key = f"{PREFIX}:together"
    calls = [("SET", key, "caf\u00e9"), ("GET", key), ("DEL", key)]
    try:
        # The answers as the server gave them (no response callbacks: OK stays b"OK").
        assert together(client, calls) == [b"OK", "caf\u00e9".encode(), 1]
    finally:
        client.close()
    # One buffer, one write to the socket: the server reads the calls in one go.
    assert len(sent) == 1 and len(sent[0]) == 1
    assert sent[0][0] == b"".join(b"".join(connection.pack_command(*c)) for c in calls)
