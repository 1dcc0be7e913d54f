"""A task enqueued on the Redis store with LATERITE_QUEUE_REDIS_WAIT whose push no replica
confirmed: the job is queued, so its result stays and records its run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

from django.test import override_settings

from laterite_django.exceptions import PushNotReplicated
from laterite_django.models import TaskResultRecord
from laterite_django.tasks.compat import TaskResultStatus
from tests.conftest import redis_store_only
from tests.testapp import task_functions as tasks
from tests.testapp.models import Record

__all__: list[str] = []


@pytest.fixture
def store_kind() -> Iterator[str]:
    """Only the Redis store: replicas are Redis's."""
    with redis_store_only(f"laterite-test-tasks-wait-{os.getpid()}") as kind:
        yield kind


def test_an_enqueue_no_replica_confirmed_keeps_its_result_and_runs_once(workers):
    """No replica here: the push is not confirmed and enqueue() raises PushNotReplicated,
    as a push does; the task is queued all the same, with its result."""
    with override_settings(LATERITE_QUEUE_REDIS_WAIT=0.05), \
            pytest.raises(PushNotReplicated) as raised:
        tasks.record.enqueue("unconfirmed")
    (saved,) = TaskResultRecord.objects.all()
    assert saved.job_id == str(raised.value.ids[0])

    run = workers.run("--stop-when-empty")
    assert run.returncode == 0, run.stderr
    saved.refresh_from_db()
    assert saved.status == TaskResultStatus.SUCCESSFUL
    assert list(Record.objects.filter(kind="task").values_list("value", flat=True)) == [
        "unconfirmed"]
