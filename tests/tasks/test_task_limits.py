"""Concurrency limits through the django.tasks backend: `@task(concurrency=N,
concurrency_key=...)` and OPTIONS["CONCURRENCY"], computed at enqueue, stored with the
job and enforced by every store's claim, measured from the tasks' own records in real
worker processes (issue 12)."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

from collections.abc import Iterator

from django.core import checks
from django.test import override_settings

from laterite_django.flow import limits as flow_limits
from laterite_django.models import FailedJob, Job, TaskResultRecord
from laterite_django.tasks import LateriteBackend
from laterite_django.tasks.compat import InvalidTask, TaskResultStatus, task, task_backends
from laterite_django.tasks.limits import concurrency_of
from tests.conftest import job_hashes, wait_for
from tests.flow.test_flow_limits import most_running, records, run_workers, stop
from tests.testapp.models import Record
from tests.testapp.task_functions import TASK_OPTIONS, noop

# The workers import the limited tasks, and no limited job (so only the tasks' limits
# can make their claims the limited ones).
FLOW = {"LATERITE_TEST_FLOW_TASKS": "1"}

pytestmark = pytest.mark.skipif(
    not TASK_OPTIONS, reason="this Django's @task does not pass keyword arguments on"
)


@pytest.fixture
def flow_tasks() -> Iterator:
    """The limited tasks, imported here too; this process's claims stay the plain ones
    for the other tests (the note of a limited task is undone afterwards)."""
    from tests.testapp import flow_tasks

    try:
        yield flow_tasks
    finally:
        flow_limits.limited_tasks.clear()


@pytest.mark.django_db(transaction=True)
def test_a_task_concurrency_key_of_one_holds_across_worker_processes(
        store, workers, flow_tasks):
    results = [flow_tasks.keyed.enqueue(f"k{i % 6}", i, 0.03) for i in range(72)]
    procs = run_workers(workers, 2, 2, "default", FLOW)
    wait_for(lambda: Record.objects.filter(kind="flow-end").count() == 72, timeout=180)
    stop(procs)
    peaks = most_running(records())
    assert sorted(peaks) == [f"k{i}" for i in range(6)]
    assert set(peaks.values()) == {1}
    for result in results:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
    assert not FailedJob.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_task_concurrency_without_a_key_counts_the_task(store, workers, flow_tasks):
    flow_tasks.two_at_a_time.enqueue(-1, 0.5)  # holds one place while the others go
    for i in range(40):
        flow_tasks.two_at_a_time.enqueue(i, 0.02)
    procs = run_workers(workers, 2, 2, "default", FLOW)
    wait_for(lambda: Record.objects.filter(kind="flow-end").count() == 41, timeout=180)
    stop(procs)
    assert most_running(records())["two"] <= 2
    assert not FailedJob.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_enqueue_stores_the_key_and_a_retry_from_the_failed_list_keeps_it(
        store, flow_tasks):
    flow_tasks.keyed.enqueue("tenant-7", 1)
    flow_tasks.two_at_a_time.enqueue(2)
    if type(store).__name__ == "DatabaseStore":
        assert sorted(Job.objects.values_list("concurrency_key", "concurrency_limit")) == [
            ("tenant-7", 1), (flow_tasks.two_at_a_time.module_path, 2)]
    # Failed (cancelled while waiting) and retried: the new job carries the same limit.
    waiting = [int(r.job_id) for r in TaskResultRecord.objects.all()]
    assert len(waiting) == 2
    store.cancel(waiting)
    assert store.retry() == 2
    if type(store).__name__ == "DatabaseStore":
        assert sorted(Job.objects.values_list("concurrency_key", "concurrency_limit")) == [
            ("tenant-7", 1), (flow_tasks.two_at_a_time.module_path, 2)]
    else:
        client, prefix = store.client, store.prefix
        keys = sorted((client.hget(k, "ck"), client.hget(k, "cl"))
                      for k in job_hashes(client, prefix))
        assert keys == [(b"tenant-7", b"1"),
                        (flow_tasks.two_at_a_time.module_path.encode(), b"2")]


def test_the_backends_concurrency_option_limits_every_task_that_sets_none():
    backend = LateriteBackend("limited", {"QUEUES": [], "OPTIONS": {"CONCURRENCY": 4}})
    plain = task(noop.func)
    try:
        assert concurrency_of(backend, plain, [], {}) == (4, plain.module_path)
        assert not flow_limits.limited_tasks
        backend.validate_task(plain)  # as a task of this backend is at its definition
        assert plain.module_path in flow_limits.limited_tasks
        unlimited = LateriteBackend("plain", {"QUEUES": [], "OPTIONS": {}})
        assert concurrency_of(unlimited, plain, [], {}) is None
    finally:
        flow_limits.limited_tasks.clear()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be an integer >= 1 or None (no limit), got 0"),
        ({"concurrency": "2"}, "concurrency must be an integer >= 1 or None (no limit), got '2'"),
        ({"concurrency": True}, "got True"),
        ({"concurrency_key": lambda: "k"}, "concurrency_key must be callable"),
        ({"concurrency": 1, "concurrency_key": "tenant"}, "got 'tenant'"),
    ],
)
def test_bad_task_limits_are_refused_at_definition_naming_the_value(options, message):
    with pytest.raises(InvalidTask, match=r"Task '.*'") as e:
        task(**options)(noop.func)
    assert message in str(e.value)
    assert not flow_limits.limited_tasks


def test_a_concurrency_key_that_is_not_a_str_is_refused_at_enqueue():
    limited = task(concurrency=1, concurrency_key=lambda n: n)(noop.func)
    try:
        with pytest.raises(TypeError, match="concurrency_key returned 5; it must return a str"):
            limited.enqueue(5)
        with pytest.raises(ValueError, match="the concurrency_key 'xxxxx"):
            task(concurrency=1, concurrency_key=lambda: "x" * 300)(noop.func).enqueue()
    finally:
        flow_limits.limited_tasks.clear()


def test_a_bad_concurrency_option_fails_the_check_naming_it():
    setting = {"default": {"BACKEND": "laterite_django.tasks.LateriteBackend", "QUEUES": [],
                           "OPTIONS": {"CONCURRENCY": -3}}}
    with override_settings(TASKS=setting):
        errors = [e for e in task_backends["default"].check() if e.id == "laterite.E103"]
    assert [e.msg for e in errors] == [
        "TASKS['default']['OPTIONS']['CONCURRENCY'] must be an integer >= 1 or None "
        "(no limit), got -3."]
    assert checks  # the messages are Django's CheckMessages
