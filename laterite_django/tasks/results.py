"""Task results kept in `TaskResultRecord`: written at enqueue and at each attempt, read back
as Django's `TaskResult`.

Each change is one short transaction that locks the row, so an attempt's
worker id and error are never lost to a concurrent write.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..conf import settings
from .compat import InvalidTask, Task, TaskError, TaskResult, TaskResultStatus
from .encrypted import opened_value

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ..models import TaskResultRecord

__all__ = [
    "UnknownTask",
    "WorkerLost",
    "aload_record",
    "build_result",
    "expiry",
    "load_record",
    "records",
    "resolve_task",
    "update_record",
]


class WorkerLost(Exception):
    """Recorded as the error of an attempt whose worker died, when no tries remain."""


def records() -> QuerySet[TaskResultRecord]:
    """Every task result, on laterite's database."""
    # Models load after the app registry is ready (a Task declared while they load builds
    # its backend, which imports this module): imported on first use.
    from ..models import TaskResultRecord

    return TaskResultRecord.objects.using(settings.DATABASE)


class UnknownTask(LookupError):
    """A task path that names no Task this process has imported."""


def resolve_task(path: str) -> Task:
    """Return the Task at module path `path`, from a module this process has imported.

    Nothing is imported here: a stored payload is data, and importing the module
    it names would run that module's code. Tasks are known because
    LateriteConfig.ready() imports each installed app's `tasks` module (and so
    whatever those import). Raise UnknownTask saying what is there instead.
    """
    parts = path.split(".") if isinstance(path, str) else []
    if len(parts) < 2 or not all(parts):
        raise UnknownTask(f"{path!r} is not a module path (module.function) of a task.")
    # The longest module the path starts with that is imported, then attributes.
    cut = next((n for n in range(len(parts) - 1, 0, -1) if ".".join(parts[:n]) in sys.modules), 0)
    found: Any = sys.modules.get(".".join(parts[:cut]))
    for depth in range(cut, len(parts)):
        # vars(), not getattr(): a module's __getattr__ may import or run code.
        namespace = vars(found) if found is not None and hasattr(found, "__dict__") else {}
        part = parts[depth]
        if part not in namespace:
            if found is None or (depth < len(parts) - 1 and hasattr(found, "__path__")):
                raise UnknownTask(
                    f"Task {path!r} is not known here: its module {'.'.join(parts[:-1])!r} is "
                    f"not imported. Define tasks in an installed app's tasks module (imported "
                    f"at start-up) or in a module that one imports."
                )
            raise UnknownTask(
                f"Task {path!r} is not known here: {'.'.join(parts[:depth])!r} has no {part!r}."
            )
        found = namespace[part]
    if not isinstance(found, Task):
        raise UnknownTask(
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
    result: TaskResult[Any] = TaskResult(
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
    # An encrypted task's value is stored sealed: opened here, where it is read.
    object.__setattr__(result, "_return_value", opened_value(task, record.return_value))
    return result


def load_record(result_id: str, backend: str):
    """Return the record of `result_id` enqueued through `backend`, or None."""
    return records().filter(pk=str(result_id), backend=backend).first()


async def aload_record(result_id: str, backend: str):
    """See load_record()."""
    return await records().filter(pk=str(result_id), backend=backend).afirst()


def update_record(result_id: str, change: Callable[[Any], None]):
    """Apply `change` to the locked record and save it; return it, or None if it is gone."""
    with transaction.atomic(using=settings.DATABASE):
        record = records().select_for_update().filter(pk=result_id).first()
        if record is None:
            return None
        change(record)
        record.save()
    return record


def expiry(finished_at: datetime, ttl: float | None) -> datetime | None:
    """Return when a result finished at `finished_at` may be pruned (None: kept for good)."""
    return None if ttl is None else finished_at + timedelta(seconds=ttl)
