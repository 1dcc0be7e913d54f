"""Chains and batches of encrypted jobs, on every store: their links and callbacks are
stored sealed as the jobs' payloads are (no plain argument in any table or Redis key),
each link is sealed again when the worker pushes it, and they run with their arguments
as given."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.db import connection

from laterite_django import batch, chain, encryption, job, registry
from laterite_django.models import Batch, FailedJob
from laterite_django.testing import run_jobs
from tests.testapp.encrypted_jobs import every, named
from tests.testapp.jobs import step
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)

SECRETS = ("amy.chain-1@example.org", "tok-chain-2", "ben.chain-3@example.org",
           "cat.batch-4@example.org", "dan.then-5@example.org", "eve.finally-6@example.org")


def at_rest(store) -> str:
    """Every row of every laterite table and, on Redis, every key and value under the
    store's prefix, as text."""
    text = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            if table.startswith("laterite"):
                cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
                text.append(repr(cursor.fetchall()))
    client = getattr(store, "client", None)
    if client is not None:
        for key in client.scan_iter(match=f"{store.prefix}:*", count=1000):
            kind = client.type(key).decode()
            value = client.hgetall(key) if kind == "hash" else (
                client.zrange(key, 0, -1) if kind == "zset" else
                client.lrange(key, 0, -1) if kind == "list" else
                client.smembers(key) if kind == "set" else client.get(key) if kind == "string"
                else b"")
            text.append(f"{key!r}: {value!r}")
    return "\n".join(text)


def leaked(store) -> list[str]:
    stored = at_rest(store)
    return [secret for secret in SECRETS if secret in stored]


def values(kind: str) -> list[str]:
    return list(Record.objects.filter(kind=kind).order_by("id").values_list("value", flat=True))


@pytest.fixture
def later() -> Iterator:
    """An encrypted job on queue 'later', which run_jobs('default') leaves waiting."""

    @job("tests.enc.later", encrypt=["email"], queue="later")
    def later_job(user_id: int, email: str) -> None:
        Record.objects.create(kind="enc-later", value=f"{user_id}|{email}", pid=os.getpid())

    yield later_job
    registry.unregister("tests.enc.later")


def test_a_chain_of_encrypted_jobs_is_stored_sealed_and_runs_as_given(store, later):
    pushed = chain(every.call(1, SECRETS[0], token=SECRETS[1]), later.call(2, SECRETS[2]),
                   named.call(3, "dee.chain@example.org")).push()
    assert pushed.status == "queued"
    assert leaked(store) == []
    run_jobs("default")  # the first link; it pushes the second, on queue 'later'
    assert values("enc-every") == [f"1|{SECRETS[0]}|{SECRETS[1]}"]
    assert leaked(store) == []
    stored = at_rest(store)
    assert "tests.enc.later" in stored and encryption.PLACEHOLDER in stored
    run_jobs(["default", "later"])
    assert values("enc-later") == [f"2|{SECRETS[2]}"]
    assert values("enc-named") == ["3|dee.chain@example.org"]
    assert leaked(store) == []


def test_an_encrypted_link_is_sealed_again_under_the_first_key_when_pushed(store, later,
                                                                           settings):
    from tests.settings import TEST_KEY_A, TEST_KEY_B

    chain(every.call(1, SECRETS[0]), later.call(2, SECRETS[2])).push()
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B, TEST_KEY_A]
    run_jobs("default")
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B]  # A is gone: the link is under B
    run_jobs("later")
    assert values("enc-later") == [f"2|{SECRETS[2]}"]
    assert not FailedJob.objects.exists()


def test_a_failed_encrypted_link_keeps_the_rest_sealed_and_its_retry_resumes(store):
    Record.objects.create(kind="gate", value="b")
    chain(step.call("a"), step.call("b"), every.call(7, SECRETS[3])).push()
    run_jobs()
    row = FailedJob.objects.get()
    assert '"chain":' in row.payload and SECRETS[3] not in row.payload
    assert leaked(store) == []
    Record.objects.filter(kind="gate").delete()
    store.retry([row.pk])
    run_jobs()
    assert values("enc-every") == [f"7|{SECRETS[3]}|"]


def test_a_batch_of_encrypted_jobs_and_callbacks_is_stored_sealed_and_runs(store):
    b = batch([every.call(i, f"{i}-{SECRETS[3]}") for i in range(3)],
              then=every.call(10, SECRETS[4], token=SECRETS[1]),
              finally_=named.call(11, SECRETS[5]), name="sealed").push()
    row = Batch.objects.get(pk=b.pk)
    assert encryption.PLACEHOLDER in row.then_call and encryption.PLACEHOLDER in row.finally_call
    assert leaked(store) == [] and not any(f"{i}-{SECRETS[3]}" in at_rest(store)
                                          for i in range(3))
    run_jobs()
    assert sorted(values("enc-every")) == sorted(
        [f"{i}|{i}-{SECRETS[3]}|" for i in range(3)] + [f"10|{SECRETS[4]}|{SECRETS[1]}"])
    assert values("enc-named") == [f"11|{SECRETS[5]}"]
    row.refresh_from_db()
    assert row.state == "finished"


def test_a_link_no_listed_key_opens_is_stored_sealed_and_fails_naming_its_key(store, later,
                                                                              settings):
    from tests.settings import TEST_KEY_A, TEST_KEY_B

    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B, TEST_KEY_A]
    chain(step.call("a"), later.call(5, SECRETS[2])).push()
    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_A]  # B, the link's key, is gone
    run_jobs()
    assert leaked(store) == []
    [failed] = FailedJob.objects.all()
    assert failed.name == "tests.enc.later" and "'test-b'" in failed.error
    assert '"key":"test-b"' in failed.payload  # kept as sealed: a key listed again opens it
