"""Tasks that encrypt their arguments (`@task(encrypt=True)` or `encrypt=[names]`), on
every store: the job, the result record and Redis hold no plain argument, nor the
value the task returned; a real worker runs them with their arguments as given and
logs nothing of them; the value reads back through get_result."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

from laterite_django import encryption
from laterite_django.models import FailedJob, Job, TaskResultRecord
from laterite_django.tasks.compat import InvalidTask, TaskResultStatus
from laterite_django.tasks.runner import ENCRYPTED_TASK_JOB
from tests.testapp import task_functions as tasks
from tests.testapp.models import Record
from tests.workflows.test_encrypted_workflows import at_rest

pytestmark = pytest.mark.skipif(not tasks.TASK_OPTIONS,
                                reason="the framework does not pass @task(encrypt=...) on")

EMAIL, TOKEN = "ann.task-1@example.org", "tok-task-2"
FAILING = "fail.task-3@example.org"
NAMED = "ben.task-4@example.org"


def test_encrypted_tasks_rest_sealed_and_run_with_their_arguments(store, workers):
    ok = tasks.enc_welcome.enqueue(1, EMAIL, token=TOKEN)
    failing = tasks.enc_welcome.enqueue(2, FAILING)
    named = tasks.enc_named.enqueue(3, NAMED)
    assert ok.args == [1, EMAIL]  # the caller's own result, in memory
    stored = at_rest(store)
    for secret in (EMAIL, TOKEN, FAILING, NAMED):
        assert secret not in stored
    if not hasattr(store, "client"):
        assert set(Job.objects.values_list("name", flat=True)) == {ENCRYPTED_TASK_JOB}
    record = TaskResultRecord.objects.get(pk=ok.id)
    assert record.args == [encryption.PLACEHOLDER] * 2
    assert record.kwargs == {"token": encryption.PLACEHOLDER}
    named_record = TaskResultRecord.objects.get(pk=named.id)
    assert named_record.args == [3, encryption.PLACEHOLDER]  # only `email` encrypted
    assert named_record.unique_key.startswith("hmac:")

    result = workers.run("--stop-when-empty")
    assert result.returncode == 0, result.stderr
    for secret in (EMAIL, TOKEN, FAILING, NAMED, "hello"):
        assert secret not in result.stderr and secret not in result.stdout

    ran = sorted(Record.objects.filter(kind__startswith="enc-task").values_list(
        "value", flat=True))
    assert ran == sorted([f"1|{EMAIL}|{TOKEN}", f"2|{FAILING}|", f"3|{NAMED}"])
    stored = at_rest(store)
    for secret in (EMAIL, TOKEN, FAILING, NAMED, "hello"):
        assert secret not in stored, secret
    ok.refresh()
    assert ok.status == TaskResultStatus.SUCCESSFUL
    assert ok.return_value == {"greeting": f"hello {EMAIL}"}  # opened where read
    assert TaskResultRecord.objects.get(pk=ok.id).return_value.keys() == {"encrypted"}
    assert tasks.enc_named.get_result(named.id).return_value == 3
    failing.refresh()
    assert failing.status == TaskResultStatus.FAILED
    [error] = failing.errors
    assert "cannot reach [redacted]" in error.traceback
    assert FAILING not in FailedJob.objects.get().error


def test_a_unique_encrypted_task_is_deduplicated_by_its_keyed_hash(store):
    first = tasks.enc_named.enqueue(1, NAMED)
    again = tasks.enc_named.enqueue(2, NAMED)
    assert again.id == first.id
    assert TaskResultRecord.objects.count() == 1


def test_encrypt_naming_no_parameter_is_refused():
    with pytest.raises(InvalidTask, match=r"Task .*: encrypt names 'mail', which is not"):
        dataclasses.replace(tasks.enc_named, encrypt=["mail"])  # validated as defined
    with pytest.raises(InvalidTask, match="encrypt must be True, False or a non-empty list"):
        dataclasses.replace(tasks.enc_named, encrypt="email")
