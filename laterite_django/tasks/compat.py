"""Django's Tasks framework, from `django.tasks` (Django 6.0+) or the `django_tasks` backport.

Importing this module without either raises ImproperlyConfigured saying
which package to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "TasksFrameworkMissing",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


class TasksFrameworkMissing(ImproperlyConfigured, ImportError):
    """Neither django.tasks nor the django_tasks backport can be imported."""


if TYPE_CHECKING:
    # mypy checks this package against Django 5.2 (the lint session's Django), where the
    # framework is the django_tasks backport; its classes and django.tasks' are the same
    # API but different types, so mypy is shown one of them.
    from django_tasks import DEFAULT_TASK_QUEUE_NAME, task, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json
else:
    try:
        from django.tasks import DEFAULT_TASK_QUEUE_NAME, task, task_backends
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import (
            TASK_MAX_PRIORITY,
            TASK_MIN_PRIORITY,
            Task,
            TaskContext,
            TaskError,
            TaskResult,
            TaskResultStatus,
        )
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json
    except ImportError:
        try:
            from django_tasks import DEFAULT_TASK_QUEUE_NAME, task, task_backends
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import (
                TASK_MAX_PRIORITY,
                TASK_MIN_PRIORITY,
                Task,
                TaskContext,
                TaskError,
                TaskResult,
                TaskResultStatus,
            )
            from django_tasks.exceptions import InvalidTaskError as InvalidTask
            from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
            from django_tasks.signals import task_enqueued, task_finished, task_started
            from django_tasks.utils import normalize_json
        except ImportError as e:
            raise TasksFrameworkMissing(
                "laterite_django.tasks needs Django's Tasks framework: Django 6.0 or newer, or "
                "on Django 5.2 the backport (pip install django-tasks)."
            ) from e
