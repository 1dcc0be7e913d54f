"""Schedules of Django's Tasks framework: `{"task": "blog.tasks.send_digest", ...}`.

A tick of such a schedule pushes `laterite.scheduled_task`, a small job that
enqueues the task through its own backend when it runs (so the task gets its
TaskResult, backend and options as if enqueued by code). That job is pushed
exactly once per tick like any schedule's; like any job, it runs again if its
worker dies in the middle of it, so the task is enqueued at least once per tick.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

from ..jobs import JobFunction
from ..registry import registry

__all__ = ["SCHEDULED_TASK", "register_if_configured", "scheduled_task_job", "task_problem"]

SCHEDULED_TASK = "laterite.scheduled_task"

_job: JobFunction | None = None
_lock = threading.Lock()


# Finds the Task at a module path (tasks.results.resolve_task), set at start-up
# (apps.ready): the tasks package sits above the schedules. It imports Django's Tasks
# framework (django.tasks, or the django_tasks backport), an optional dependency, when
# first called: ImportError without it.
_resolve_task: Callable[[str], Any] | None = None


def set_task_resolver(resolve: Callable[[str], Any]) -> None:
    """Register what finds the Task at a module path (called by ready())."""
    global _resolve_task
    _resolve_task = resolve


def resolve_task(path: str) -> Any:
    """The Task at `path` (see tasks.results.resolve_task)."""
    if _resolve_task is None:
        raise RuntimeError("laterite_django is not ready: is it in INSTALLED_APPS?")
    return _resolve_task(path)


def enqueue_task(task: str, args: list, kwargs: dict) -> str:
    """The `laterite.scheduled_task` job: enqueue the Task at `task`; return its result id."""
    return str(resolve_task(task).enqueue(*args, **kwargs).id)


def scheduled_task_job() -> JobFunction:
    """The `laterite.scheduled_task` job, registered in this process if not yet."""
    global _job
    with _lock:
        if _job is None:
            _job = JobFunction(enqueue_task, name=SCHEDULED_TASK)
        if SCHEDULED_TASK not in registry:
            registry.register(_job)
    return _job


def register_if_configured() -> None:
    """At start-up (ready()): register the job if a configured schedule names a task, so a
    worker that runs no scheduler runs it too."""
    configured = getattr(settings, "LATERITE_QUEUE_SCHEDULES", None)
    if isinstance(configured, dict) and any(
        isinstance(spec, dict) and "task" in spec for spec in configured.values()
    ):
        scheduled_task_job()


def task_problem(path: Any, args: Any, kwargs: Any) -> tuple[int, str] | None:
    """What is wrong with scheduling the task at `path` with these arguments, if anything:
    (check code, text)."""
    try:
        found = resolve_task(path)
    except ImportError as e:  # the optional dependency: see _resolve_task
        return 21, f"task {path!r} needs Django's Tasks framework ({e})"
    except LookupError as e:
        return 21, str(e).rstrip(".")
    parameters = list(inspect.signature(found.func).parameters.values())
    if found.takes_context:
        parameters = parameters[1:]
    try:
        inspect.Signature(parameters).bind(*args, **kwargs)
    except TypeError as e:
        return 24, f"task {path!r} cannot be called with these arguments: {e}"
    return None
