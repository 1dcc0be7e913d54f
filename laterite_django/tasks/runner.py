"""The job that runs Django tasks: `laterite.task`, one registered job for every task.

A task is stored as a call of this job (its module path, arguments, backend
alias and result id), so one table and one `queue_work` serve jobs and tasks
alike. Each call gives the worker's rules the task's own tries, backoff and
timeout (`TaskJob.options_for`); the rules decide retry or fail as for any job,
and `TaskJob.after_settle` records that decision in the task's result and
sends Django's task signals.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings as django_settings
from django.utils.module_loading import autodiscover_modules

from .. import payload
from ..context import JobContext
from ..core.rules import Decision, JobOptions
from ..core.values import Claim
from ..jobs import JobFunction
from ..registry import registry

if TYPE_CHECKING:
    from .task_run import TaskRun

__all__ = ["ENCRYPTED_TASK_JOB", "TASK_JOB", "TaskJob", "register_if_configured", "run_task",
           "task_job"]

TASK_JOB = "laterite.task"
# The job of the tasks that encrypt their arguments (tasks/encrypted.py): its call's
# `args` and `kwargs` are sealed.
ENCRYPTED_TASK_JOB = "laterite.task.encrypted"
BACKEND_PATH = "laterite_django.tasks"

_jobs: dict[str, JobFunction] = {}
_lock = threading.Lock()


def _pushed_key(*args: Any, unique_key: str | None = None, **kwargs: Any) -> str | None:
    """The unique key the backend computed at enqueue, carried in the payload."""
    return unique_key


class TaskJob(JobFunction):
    """The `laterite.task` job: its options are those of the Task each call runs."""

    # Its unique and concurrency keys are the backend's, computed at enqueue from the
    # task's arguments (as keyed hashes for an encrypted task): none from its own.
    keys_given = True

    def options_for(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> JobOptions:
        call = _call_of(args, kwargs)
        return _task_run().options(call["task"], call["backend"])

    def concurrency_of(self, args: Sequence[Any], kwargs: Mapping[str, Any]
                       ) -> tuple[int, str] | None:
        """The limit and key the backend computed at enqueue, carried in the call."""
        limit, key = kwargs.get("concurrency"), kwargs.get("concurrency_key")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1 and isinstance(
                key, str) and key:
            return limit, key
        return None

    def after_settle(self, claim: Claim, decision: Decision) -> None:
        args, kwargs = payload.decode(claim.payload)
        call = _call_of(args, kwargs)
        _task_run()(call["task"], call["args"], call["kwargs"], call["backend"], call["result"],
                    _context(claim)).settled(decision)


def _task_run() -> type[TaskRun]:
    """TaskRun, which runs a task's attempt, imported on first use."""
    # Optional dependency: Django's Tasks framework (django.tasks, or the django_tasks
    # backport), which task_run imports; this module is imported without it (ready()).
    from .task_run import TaskRun

    return TaskRun


def _call_of(args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of one `run_task` call, by name."""
    bound = inspect.signature(run_task).bind_partial(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _context(claim: Claim) -> JobContext:
    return JobContext(id=claim.id, name=claim.name, queue=claim.queue,
                      attempt=claim.attempts, pushed_at=claim.pushed_at)


def task_job(encrypted: bool = False) -> JobFunction:
    """Return the `laterite.task` job (`laterite.task.encrypted` for a task that
    encrypts its arguments), registering it if this process has not yet."""
    name = ENCRYPTED_TASK_JOB if encrypted else TASK_JOB
    with _lock:
        job = _jobs.get(name)
        if job is None:
            job = _jobs[name] = TaskJob(run_task, name=name, unique_key=_pushed_key,
                                        encrypt=["args", "kwargs"] if encrypted else False)
        if name not in registry:
            registry.register(job)
    return job


def register_if_configured() -> None:
    """When a TASKS backend is laterite's (called by ready()): register `laterite.task` and
    import each installed app's `tasks` module, the only tasks a worker resolves by path."""
    backends = getattr(django_settings, "TASKS", None)
    if isinstance(backends, dict) and any(
        isinstance(params, dict) and str(params.get("BACKEND", "")).startswith(BACKEND_PATH)
        for params in backends.values()
    ):
        task_job()
        autodiscover_modules("tasks")


def run_task(
    task: str,
    args: list,
    kwargs: dict,
    backend: str = "default",
    result: str | None = None,
    unique_key: str | None = None,
    concurrency: int | None = None,
    concurrency_key: str | None = None,
    *,
    cx: JobContext,
) -> Any:
    """Run the task at module path `task` once, as attempt `cx.attempt` of its result.

    `unique_key`, `concurrency` and `concurrency_key` are the backend's, computed at
    enqueue: the store keeps them with the job, the run ignores them.
    """
    return _task_run()(task, args, kwargs, backend, result, cx).run()
