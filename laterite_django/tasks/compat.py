"""Django's Tasks framework, from `django.tasks` (Django 6.0+) or the `django_tasks` backport.

Importing this module without either raises ImproperlyConfigured saying
which package to install.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
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


# The framework's modules under its package, the same in Django and in the backport.
_MODULES = ("base", "backends.base", "exceptions", "signals")


class TasksFrameworkMissing(ImproperlyConfigured, ImportError):
    """Neither django.tasks nor the django_tasks backport can be imported."""


def _framework() -> tuple[ModuleType, ...]:
    """Import the framework's modules, Django's own first, else the backport's: the package,
    base, backends.base, exceptions, signals, and the one holding normalize_json."""
    try:
        return _modules("django.tasks", "django.utils.json")
    except ImportError:
        try:
            return _modules("django_tasks", "django_tasks.utils")
        except ImportError as e:
            raise TasksFrameworkMissing(
                "laterite_django.tasks needs Django's Tasks framework: Django 6.0 or newer, or "
                "on Django 5.2 the backport (pip install django-tasks)."
            ) from e


def _modules(package: str, json: str) -> tuple[ModuleType, ...]:
    """Import `package` and its _MODULES, then `json` (where normalize_json lives)."""
    names = [package] + [f"{package}.{module}" for module in _MODULES] + [json]
    return tuple(import_module(name) for name in names)


if TYPE_CHECKING:
    # mypy checks this package against Django 5.2 (the lint session's Django), where the
    # framework is the django_tasks backport; its classes and django.tasks' are the same
    # API but different types, so mypy is shown one of them.
    import django_tasks as _tasks
    from django_tasks import base as _base
    from django_tasks import exceptions as _exceptions
    from django_tasks import signals as _signals
    from django_tasks import utils as _json
    from django_tasks.backends import base as _backends
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
else:
    _tasks, _base, _backends, _exceptions, _signals, _json = _framework()
    # The one name the backport spells its own way.
    InvalidTask = getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError

DEFAULT_TASK_QUEUE_NAME = _tasks.DEFAULT_TASK_QUEUE_NAME
task = _tasks.task
task_backends = _tasks.task_backends
BaseTaskBackend = _backends.BaseTaskBackend
TASK_MAX_PRIORITY = _base.TASK_MAX_PRIORITY
TASK_MIN_PRIORITY = _base.TASK_MIN_PRIORITY
Task = _base.Task
TaskContext = _base.TaskContext
TaskError = _base.TaskError
TaskResult = _base.TaskResult
TaskResultStatus = _base.TaskResultStatus
TaskResultDoesNotExist = _exceptions.TaskResultDoesNotExist
TaskResultMismatch = _exceptions.TaskResultMismatch
task_enqueued = _signals.task_enqueued
task_finished = _signals.task_finished
task_started = _signals.task_started
normalize_json = _json.normalize_json
