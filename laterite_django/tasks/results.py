"""Task results kept in `TaskResultRecord`: written at enqueue and at each attempt, read back
as Django's `TaskResult`.

Each change is one short transaction that locks the row, so an attempt's
worker id and error are never lost to a concurrent write.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils.module_loading import import_string

from ..conf import settings
from .compat import InvalidTask, Task, TaskError, TaskResult, TaskResultStatus

__all__ = [
    "WorkerLost",
    "aload_record",
    "build_result",
    "expiry",
    "load_record",
    "resolve_task",
    "update_record",
]


class WorkerLost(Exception):
    """Recorded as the error of an attempt whose worker died, when no tries remain."""


def _records():
    from ..models import TaskResultRecord

    return TaskResultRecord.objects.using(settings.DATABASE)


def resolve_task(path: str) -> Task:
    """Import the Task at `path`; raise ImportError or TypeError saying what is there instead."""
    found = import_string(path)
    if not isinstance(found, Task):
        raise TypeError(
            f"{path!r} is {type(found).__name__}, not a Task: is the function still "
            f"decorated with @task?"
        )
    return found


def build_result(record: Any, task: Task | None = None) -> TaskResult:
    """Return the TaskResult a record describes, with the task as it was enqueued."""
    if task is None:
        task = resolve_task(record.task_path)
    # If the settings changed since, the task as defined still names it.
    with suppress(InvalidTask):
        task = task.using(
            priority=record.priority,
            queue_name=record.queue,
            run_after=record.run_after,
            backend=record.backend,
        )
    result = TaskResult(
        task=task,
        id=record.pk,
        status=TaskResultStatus(record.status),
        enqueued_at=record.enqueued_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        last_attempted_at=record.last_attempted_at,
        args=record.args,
        kwargs=record.kwargs,
        backend=record.backend,
        errors=[
            TaskError(exception_class_path=e["exception_class_path"], traceback=e["traceback"])
            for e in record.errors
        ],
        worker_ids=list(record.worker_ids),
    )
    object.__setattr__(result, "_return_value", record.return_value)
    return result


def load_record(result_id: str, backend: str):
    """Return the record of `result_id` enqueued through `backend`, or None."""
    return _records().filter(pk=str(result_id), backend=backend).first()


async def aload_record(result_id: str, backend: str):
    """See load_record()."""
    return await _records().filter(pk=str(result_id), backend=backend).afirst()


def update_record(result_id: str, change: Callable[[Any], None]):
    """Apply `change` to the locked record and save it; return it, or None if it is gone."""
    with transaction.atomic(using=settings.DATABASE):
        record = _records().select_for_update().filter(pk=result_id).first()
        if record is None:
            return None
        change(record)
        record.save()
    return record


def expiry(finished_at: datetime, ttl: float | None) -> datetime | None:
    """Return when a result finished at `finished_at` may be pruned (None: kept for good)."""
    return None if ttl is None else finished_at + timedelta(seconds=ttl)
