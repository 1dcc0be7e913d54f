"""queue_rekey and the Redis store's list of history records (P:history: records of
finished jobs waiting for a worker's sweep to move them to the JobRecord table). Records
left there under key A; the keys become [B, A]; the command re-encrypts them in the list
under B; under [B] alone, the sweep moves them and the history reads every one. And a
move that read the list before the command re-encrypted it writes each record once,
ending under B."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.test import override_settings

from laterite_django import encryption
from laterite_django.checks import check_retired_keys
from laterite_django.models import JobRecord
from laterite_django.stores.redis import history as redis_history
from tests.settings import TEST_KEY_A, TEST_KEY_B
from tests.testapp.encrypted_jobs import every

HISTORY = {"keep": "7d"}


@pytest.fixture
def redis_store(store, store_kind):
    if store_kind != "redis":
        pytest.skip("the Redis store's list of history records")
    return store


def listed(store) -> list[list]:
    return [json.loads(entry) for entry in store.client.lrange(f"{store.prefix}:history", 0, -1)]


def finish_unmoved(store, users: range) -> None:
    """Push an encrypted job per user, claim and settle them: their records wait in
    P:history (no sweep runs here)."""
    every.push_many([(i, f"hist-{i}@example.org") for i in users])
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        claims = store.claim(["default"], "host:9", len(users))
        assert len(claims) == len(users)
        assert store.delete(claims) == len(users)


def read_history() -> dict[int, list]:
    """Each history record's arguments, opened (under the keys listed now)."""
    return {record.job_id: encryption.open_arguments(record.payload)[0]
            for record in JobRecord.objects.all()}


def test_rekey_re_encrypts_the_records_waiting_in_redis(redis_store, settings):
    store = redis_store
    store.client.incrby(f"{store.prefix}:history:taken", 7)  # as after earlier moves
    finish_unmoved(store, range(5))
    assert [encryption.key_ids(record[3]) for record in listed(store)] == [{"test-a"}] * 5
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B]
    [warning] = check_retired_keys(databases=["default"])
    assert "5 history records waiting in Redis under 'test-a'" in warning.msg, warning.msg

    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B, TEST_KEY_A]
    out, err = io.StringIO(), io.StringIO()
    call_command("queue_rekey", "--chunk", "2", stdout=out, stderr=err)
    assert err.getvalue() == ""
    said = out.getvalue()
    assert "history records waiting in Redis: done up to #12 (5 re-encrypted)" in said, said
    assert "5 history records waiting in Redis" in said.splitlines()[-1], said
    records = listed(store)
    assert [encryption.key_ids(record[3]) for record in records] == [{"test-b"}] * 5
    assert [len(record) for record in records] == [len(r) for r in records[:1]] * 5

    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B]
    assert check_retired_keys(databases=["default"]) == []
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        store.tidy()  # the sweep
    assert store.client.llen(f"{store.prefix}:history") == 0
    found = read_history()
    assert sorted(found.values()) == [[i, f"hist-{i}@example.org"] for i in range(5)]


def test_a_move_that_read_the_list_before_the_rekey_writes_each_record_once(
        redis_store, settings, monkeypatch):
    """The list starts with a record under B already, then records under A: the move
    reads them all, the command re-encrypts those under A in the list before the move
    writes what it read, under A. The move leaves them listed (not the records it read);
    the next finds them written and sets the rows to the listed ciphertext."""
    store = redis_store
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B, TEST_KEY_A]
    finish_unmoved(store, range(1))  # under B: the command leaves it as it is
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_A]
    finish_unmoved(store, range(1, 4))
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B, TEST_KEY_A]
    insert = redis_history.insert_rows
    rekeyed = io.StringIO()

    def rekey_first(rows, database):
        if not rekeyed.getvalue():
            call_command("queue_rekey", stdout=rekeyed)
        insert(rows, database)

    monkeypatch.setattr(redis_history, "insert_rows", rekey_first)
    with override_settings(LATERITE_QUEUE_HISTORY=HISTORY):
        assert store.move_history() == 4
        assert "done up to #4 (3 re-encrypted)" in rekeyed.getvalue(), rekeyed.getvalue()
        assert store.client.llen(f"{store.prefix}:history") == 4  # left: not as read
        assert store.move_history() == 0  # written already: mended, taken off
    assert store.client.llen(f"{store.prefix}:history") == 0
    assert JobRecord.objects.count() == 4
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B]
    found = read_history()
    assert sorted(found.values()) == [[i, f"hist-{i}@example.org"] for i in range(4)]
