"""Every place encrypted arguments rest, on every store, under key A: waiting jobs, chain
links, batch callbacks, the failed list and the outbox (on Redis, rows a commit left
there while Redis was away; on the database stores, rows left from a time the store
was Redis). The check of retired keys (laterite.W043) names them once A is no longer
listed; `queue_rekey` under [B, A] moves every one to B; under [B] alone the check is
quiet and every job runs with its arguments."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from laterite_django import batch, chain, encryption
from laterite_django.checks import RETIRED_KEYS_SAMPLE, check_retired_keys
from laterite_django.models import Batch, FailedJob, JobRecord, OutboxJob, TaskResultRecord
from laterite_django.stores.redis.store import KEPT
from laterite_django.testing import run_jobs
from tests.conftest import ROOT
from tests.management.test_commands import unmigrated  # noqa: F401 -- a fixture
from tests.settings import TEST_KEY_A, TEST_KEY_B
from tests.testapp.encrypted_jobs import broken, every
from tests.testapp.models import Record

pytestmark = pytest.mark.django_db(transaction=True)


def warnings() -> list:
    return check_retired_keys(databases=["default"])


def outbox_row_under_a(store, monkeypatch) -> None:
    """An outbox row that stays: on Redis, a push whose move after the commit fails (as
    with Redis away); on a database store, one written as the Redis store writes it."""
    if store.client_kind == "redis":
        def away(ids):
            raise ConnectionError("Redis is away")

        monkeypatch.setattr(store, "_move_outbox_ids", away)
        with transaction.atomic():
            every.push(5, "o5@example.org")
        monkeypatch.undo()
    else:
        [new] = every.new_jobs([((5, "o5@example.org"), {})])
        OutboxJob.objects.create(**{field: getattr(new, field) for field in KEPT})
    assert OutboxJob.objects.count() == 1


def history_and_result_under_a() -> tuple[JobRecord, TaskResultRecord]:
    """A history record of an encrypted job and an encrypted task's result, under A, as
    the store and the task runner write them."""
    [new] = every.new_jobs([((9, "h9@example.org"), {})])
    data = json.loads(new.payload)
    now = timezone.now()
    record = JobRecord.objects.create(
        job_id=1, name=every.name, queue="default", args=data["args"], kwargs=data["kwargs"],
        encrypted=data["encrypted"], status="succeeded", finished_at=now)
    result = TaskResultRecord.objects.create(
        id="r10", task_path="tests.testapp.task_functions.enc_welcome", backend="default",
        queue="default", enqueued_at=now, status="SUCCESSFUL",
        return_value={"encrypted": encryption.keyring().seal(
            json.dumps({"greeting": "r10@example.org"}).encode())})
    return record, result


@pytest.fixture
def kind(store):
    store.client_kind = "redis" if hasattr(store, "client") else "database"
    return store


def test_the_check_names_retired_keys_and_rekey_moves_every_place(kind, settings, monkeypatch):
    store = kind
    broken.push("x8@example.org", {"n": 8})
    run_jobs()  # fails for good: the failed list holds it, under A
    every.push(1, "w1@example.org")
    chain(every.call(2, "c2@example.org"), every.call(3, "c3@example.org")).push()
    b = batch([every.call(4, "b4@example.org")], then=every.call(6, "t6@example.org"),
              finally_=every.call(7, "f7@example.org")).push()
    outbox_row_under_a(store, monkeypatch)
    record, result = history_and_result_under_a()
    assert warnings() == []  # A is listed

    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B]
    [warning] = warnings()
    assert warning.id == "laterite.W043"
    for said in ("waiting or delayed jobs under 'test-a'", "1 failed jobs under 'test-a'",
                 "1 outbox jobs under 'test-a'",
                 "batch then callbacks under 'test-a'", "batch finally_ callbacks under "
                 "'test-a'", "1 history records under 'test-a'",
                 "1 task results under 'test-a'"):
        assert said in warning.msg, warning.msg
    assert "batch catch" not in warning.msg  # none: nothing to say
    assert f"among the first {RETIRED_KEYS_SAMPLE}" in warning.msg

    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B, TEST_KEY_A]
    out, err = io.StringIO(), io.StringIO()
    call_command("queue_rekey", "--chunk", "2", stdout=out, stderr=err)
    assert err.getvalue() == ""
    said = out.getvalue().splitlines()[-1]
    assert "and 1 failed job(s)" in said and "1 outbox jobs" in said, said
    assert "1 batch then callbacks" in said, said
    assert "1 batch finally_ callbacks" in said and "under key 'test-b'" in said, said
    assert "1 history records" in said and "1 task results" in said, said
    record.refresh_from_db()
    assert record.encrypted["key"] == "test-b"
    result.refresh_from_db()
    assert result.return_value["encrypted"]["key"] == "test-b"
    row = Batch.objects.get(pk=b.pk)
    assert encryption.key_ids(row.then_call) == {"test-b"}
    assert encryption.key_ids(OutboxJob.objects.get().payload) == {"test-b"}

    settings.LATERITE_QUEUE_ENCRYPTION_KEYS = [TEST_KEY_B]
    assert warnings() == []
    with_record = encryption.open_arguments(record.payload)[0]
    assert with_record == [9, "h9@example.org"]
    assert json.loads(encryption.keyring().open(result.return_value["encrypted"])) == {
        "greeting": "r10@example.org"}
    again = io.StringIO()
    call_command("queue_rekey", stdout=again)
    assert again.getvalue().splitlines()[-1].startswith("Re-encrypted 0 waiting")
    if store.client_kind == "redis":
        assert store.move_outbox() == 1
    else:  # no worker of a database store moves the outbox: its row opens under B alone
        assert encryption.open_arguments(OutboxJob.objects.get().payload)[0] == [
            5, "o5@example.org"]
        OutboxJob.objects.all().delete()
    run_jobs()
    ran = sorted(Record.objects.filter(kind="enc-every").values_list("value", flat=True))
    expected = ["1|w1", "2|c2", "3|c3", "4|b4", "6|t6", "7|f7"]
    if store.client_kind == "redis":
        expected.append("5|o5")
    assert ran == sorted(f"{value}@example.org|" for value in expected)
    [failed] = FailedJob.objects.all()  # broken: ran under B, failed, readable under B
    assert encryption.open_arguments(failed.payload)[0][0] == "x8@example.org"


def test_check_and_migrate_run_on_a_database_not_migrated(workers, store_kind,
                                                          unmigrated):  # noqa: F811
    env = {**unmigrated, "LATERITE_TEST_ENCRYPTION_KEYS": json.dumps([TEST_KEY_B])}
    for args in (["check", "--database", "default"], ["migrate", "-v", "0"]):
        result = subprocess.run([sys.executable, "-m", "django", *args], cwd=ROOT,
                                env=workers.env(**env), capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stderr
        assert "W043" not in result.stderr and "Traceback" not in result.stderr
