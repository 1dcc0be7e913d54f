"""`LateriteBackend`: Django's Tasks framework on laterite's queue and worker.

`Task.enqueue()` stores the task as a call of the `laterite.task` job, so
`queue_work` runs tasks and jobs alike, with laterite's retries, backoff,
timeouts, recovery of crashed workers and failed list. Results are kept in
`TaskResultRecord` for OPTIONS["RESULT_TTL"] seconds after the task finishes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.apps import apps
from django.core import checks

from ..conf import raw
from ..core.backoff import Backoff
from ..core.sizes import QUEUE_MAX, TASK_PATH_MAX, unfit
from .compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
)
from .encrypted import validate_encrypt
from .enqueue import enqueue_task
from .limits import validate_limit
from .lookup import laterite_backend
from .options import DEFAULT_OPTIONS, option_problem
from .results import aload_record, build_result, load_record
from .runner import TASK_JOB, task_job
from .task import DEFAULT, LateriteTask

__all__ = ["DEFAULT_OPTIONS", "LateriteBackend", "laterite_backend"]


class LateriteBackend(BaseTaskBackend):
    """Run Django tasks with laterite: `TASKS = {"default": {"BACKEND":
    "laterite_django.tasks.LateriteBackend", "QUEUES": [...], "OPTIONS": {...}}}`.

    OPTIONS: TRIES, BACKOFF, TIMEOUT, CONCURRENCY (defaults for every task, which
    `@task(tries=..., backoff=..., timeout=..., concurrency=...)` overrides on
    Django 6.1+ and the backport) and RESULT_TTL (seconds a finished result is kept).
    """

    task_class = LateriteTask
    # What laterite_backend() (tasks.lookup) knows a LateriteBackend by.
    runs_laterite_tasks = True

    # run_after: the job waits in the queue until then.
    supports_defer = True
    # Coroutine functions run to completion in the worker.
    supports_async_task = True
    # Results live in the database, readable from any process.
    supports_get_result = True
    # The worker claims higher priorities first within a queue.
    supports_priority = True

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        merged = {**DEFAULT_OPTIONS, **(self.options if isinstance(self.options, Mapping) else {})}
        self.tries: int = merged["TRIES"]
        self.backoff: Backoff = merged["BACKOFF"]
        self.timeout: float | None = merged["TIMEOUT"]
        self.result_ttl: float | None = merged["RESULT_TTL"]
        self.concurrency: int | None = merged["CONCURRENCY"]
        task_job()  # so worker threads in this process know the job

    # -- validation -----------------------------------------------------------------

    def run_options(self, task: Task) -> tuple[int, Backoff, float | None]:
        """Return (tries, backoff, timeout) for `task`: its own, else this backend's."""

        def pick(name: str, default: Any) -> Any:
            value = getattr(task, name, DEFAULT)
            return default if value is DEFAULT else value

        return (
            pick("tries", self.tries),
            pick("backoff", self.backoff),
            pick("timeout", self.timeout),
        )

    def validate_task(self, task: Task) -> None:
        """Check the task as Django does, then its laterite options."""
        super().validate_task(task)
        if not isinstance(task.queue_name, str) or not task.queue_name:
            raise InvalidTask(
                f"Task {task.module_path!r}: queue_name must be a non-empty string, got "
                f"{task.queue_name!r}."
            )
        problem = unfit("queue_name", task.queue_name, QUEUE_MAX) or unfit(
            "its module path", task.module_path, TASK_PATH_MAX
        )
        if problem:
            raise InvalidTask(f"Task {task.module_path!r}: {problem}.")
        for name, value in zip(("TRIES", "BACKOFF", "TIMEOUT"), self.run_options(task),
                               strict=True):
            problem = option_problem(name, value)
            if problem:
                source = (
                    f"the backend's OPTIONS[{name!r}]"
                    if getattr(task, name.lower(), DEFAULT) is DEFAULT
                    else name.lower()
                )
                raise InvalidTask(f"Task {task.module_path!r}: {source} {problem}.")
        unique_key = getattr(task, "unique_key", None)
        if unique_key is not None and not callable(unique_key):
            raise InvalidTask(
                f"Task {task.module_path!r}: unique_key must be callable(*args, **kwargs) -> "
                f"str or None, got {unique_key!r}."
            )
        validate_limit(self, task)
        encrypt = getattr(task, "encrypt", False)
        if encrypt is not False:
            if isinstance(encrypt, list):  # a Task is frozen and hashed: kept as a tuple
                object.__setattr__(task, "encrypt", tuple(encrypt))
            validate_encrypt(task)
            if encrypt:
                task_job(encrypted=True)  # so this process, a worker too, knows its job

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        yield from super().check(**kwargs)
        label = f"TASKS[{self.alias!r}]"
        if not apps.is_installed("laterite_django"):
            yield checks.Error(
                f"{label} uses LateriteBackend but laterite_django is not in INSTALLED_APPS.",
                hint="Add 'laterite_django' to INSTALLED_APPS and run migrate.",
                id="laterite.E101",
            )
        if not isinstance(self.options, Mapping):
            yield checks.Error(
                f"{label}['OPTIONS'] is {self.options!r}; it must be a dict.",
                id="laterite.E102",
            )
            return
        for name in sorted(set(self.options) - set(DEFAULT_OPTIONS)):
            yield checks.Error(
                f"{label}['OPTIONS'] has {name!r}, which LateriteBackend does not know.",
                hint=f"Known options: {', '.join(DEFAULT_OPTIONS)}.",
                id="laterite.E102",
            )
        for name in DEFAULT_OPTIONS:
            problem = option_problem(name, getattr(self, name.lower()))
            if problem:
                yield checks.Error(f"{label}['OPTIONS'][{name!r}] {problem}.", id="laterite.E103")
        worker_queues = raw("QUEUES")  # a bad value is check_settings' to report
        if isinstance(worker_queues, list | tuple):
            for queue in sorted(q for q in self.queues if q not in worker_queues):
                yield checks.Warning(
                    f"{label} has queue {queue!r}, which LATERITE_QUEUE_QUEUES "
                    f"({list(worker_queues)!r}) does not list: a plain `queue_work` never "
                    f"runs its tasks.",
                    hint=f"Add {queue!r} to LATERITE_QUEUE_QUEUES, or run "
                    f"`queue_work --queue {queue}`.",
                    id="laterite.W101",
                )

    # -- enqueue ----------------------------------------------------------------------

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskResult:
        """Store the task as a laterite job and return its result, READY.

        A task with a unique_key whose key already waits is not queued again:
        the waiting task's result is returned instead.
        """
        return enqueue_task(self, task, args, kwargs)

    # -- results ----------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        """Return the result of a task enqueued through this backend; raise
        TaskResultDoesNotExist if there is none (never enqueued, or pruned)."""
        record = load_record(result_id, self.alias)
        if record is None:
            raise TaskResultDoesNotExist(result_id)
        return build_result(record)

    async def aget_result(self, result_id: str) -> TaskResult:
        """See get_result()."""
        record = await aload_record(result_id, self.alias)
        if record is None:
            raise TaskResultDoesNotExist(result_id)
        return build_result(record)

    def __repr__(self) -> str:
        return f"<LateriteBackend {self.alias!r} job={TASK_JOB!r}>"

