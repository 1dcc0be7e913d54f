"""A task enqueued inside transaction.atomic() on the Redis store: its job waits in the
database outbox with its result, so a commit while Redis is down loses neither."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)

from django.db import transaction

from laterite_django.models import OutboxJob, TaskResultRecord
from laterite_django.tasks.compat import TaskResultStatus
from tests.stores.redis.test_outbox import redis_down, store_kind  # noqa: F401 -- fixtures
from tests.testapp import task_functions as tasks
from tests.testapp.models import Record

__all__: list[str] = []


def test_a_task_enqueued_in_a_commit_while_redis_is_down_runs_once_it_is_back(
        redis_down, workers):  # noqa: F811
    with transaction.atomic():
        result = tasks.record.enqueue("kept")
    # Committed with the caller's data: the result, and the job in the outbox.
    assert TaskResultRecord.objects.get(pk=result.id).status == TaskResultStatus.READY
    assert list(OutboxJob.objects.values_list("name", flat=True)) == ["laterite.task"]
    redis_down.back()
    run = workers.run("--stop-when-empty")
    assert run.returncode == 0, run.stderr
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert list(Record.objects.filter(kind="task").values_list("value", flat=True)) == ["kept"]
    assert OutboxJob.objects.count() == 0


def test_a_rolled_back_task_leaves_neither_result_nor_job(redis_down):  # noqa: F811
    with pytest.raises(RuntimeError, match="roll back"), transaction.atomic():
        tasks.record.enqueue("dropped")
        raise RuntimeError("roll back")
    assert TaskResultRecord.objects.count() == OutboxJob.objects.count() == 0
