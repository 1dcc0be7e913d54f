"""`LateriteBackend`: Django's Tasks framework on laterite's queue and worker.

`Task.enqueue()` stores the task as a call of the `laterite.task` job, so
`queue_work` runs tasks and jobs alike, with laterite's retries, backoff,
timeouts, recovery of crashed workers and failed list. Results are kept in
`TaskResultRecord` for OPTIONS["RESULT_TTL"] seconds after the task finishes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

from django.apps import apps
from django.core import checks
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import get_random_string

from ..backoff import Backoff, validate_backoff
from ..conf import raw, settings
from ..context import Pushed
from ..limits import QUEUE_MAX, TASK_PATH_MAX, UNIQUE_KEY_MAX, too_long
from ..payload import check_keys
from ..stores import get_store
from .compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)
from .limits import concurrency_of, concurrency_problem, validate_limit
from .results import aload_record, build_result, load_record
from .runner import TASK_JOB, task_job
from .task import DEFAULT, LateriteTask

__all__ = ["DEFAULT_OPTIONS", "LateriteBackend", "laterite_backend"]

DEFAULT_OPTIONS: dict[str, Any] = {
    "TRIES": 3,
    "BACKOFF": None,  # laterite's default: 10 s doubling, capped at 2560 s
    "TIMEOUT": 60,
    "RESULT_TTL": 7 * 24 * 3600,
    "CONCURRENCY": None,  # at most N of each task running at once; None = no limit
}


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and float(value) > 0


def _option_problem(name: str, value: Any) -> str | None:
    """Say what is wrong with a value of option `name` ("TRIES", ...), or return None."""
    if name == "TRIES" and not (_is_whole(value) and value >= 0):
        return f"must be an integer >= 0 (0 = retry without end), got {value!r}"
    if name == "TIMEOUT" and not (value is None or _is_seconds(value)):
        return f"must be seconds > 0 or None (no limit), got {value!r}"
    if name == "RESULT_TTL" and not (value is None or _is_seconds(value)):
        return f"must be seconds > 0 or None (kept for good), got {value!r}"
    if name == "CONCURRENCY":
        return concurrency_problem(value)
    if name == "BACKOFF":
        try:
            validate_backoff("backoff", value)
        except (TypeError, ValueError) as e:
            text = str(e).removeprefix("Job 'backoff': ").rstrip(".")
            return text.removeprefix("backoff ") if text.startswith("backoff ") else (
                f"is wrong: {text}"
            )
    return None


class LateriteBackend(BaseTaskBackend):
    """Run Django tasks with laterite: `TASKS = {"default": {"BACKEND":
    "laterite_django.tasks.LateriteBackend", "QUEUES": [...], "OPTIONS": {...}}}`.

    OPTIONS: TRIES, BACKOFF, TIMEOUT, CONCURRENCY (defaults for every task, which
    `@task(tries=..., backoff=..., timeout=..., concurrency=...)` overrides on
    Django 6.1+ and the backport) and RESULT_TTL (seconds a finished result is kept).
    """

    task_class = LateriteTask

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
        problem = too_long("queue_name", task.queue_name, QUEUE_MAX) or too_long(
            "its module path", task.module_path, TASK_PATH_MAX
        )
        if problem:
            raise InvalidTask(f"Task {task.module_path!r}: {problem}.")
        for name, value in zip(("TRIES", "BACKOFF", "TIMEOUT"), self.run_options(task),
                               strict=True):
            problem = _option_problem(name, value)
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
            problem = _option_problem(name, getattr(self, name.lower()))
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

    def _unique_key(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        make_key = getattr(task, "unique_key", None)
        if make_key is None:
            return None
        key = make_key(*args, **kwargs)
        if key is not None and not isinstance(key, str):
            raise TypeError(
                f"Task {task.module_path!r}: unique_key returned {key!r}; it must return a str "
                f"or None."
            )
        problem = key and too_long("the unique_key", key, UNIQUE_KEY_MAX)
        if problem:
            raise ValueError(f"Task {task.module_path!r}: {problem}.")
        return key

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> TaskResult:
        """Store the task as a laterite job and return its result, READY.

        A task with a unique_key whose key already waits is not queued again:
        the waiting task's result is returned instead.
        """
        from ..models import TaskResultRecord

        self.validate_task(task)
        enqueued_at = timezone.now()
        result: TaskResult[Any] = TaskResult(
            task=task,
            id=get_random_string(32),
            status=TaskResultStatus.READY,
            enqueued_at=enqueued_at,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        check_keys(f"Task {task.module_path!r}", result.args, result.kwargs)
        key = self._unique_key(task, result.args, result.kwargs)
        call: dict[str, Any] = {
            "task": task.module_path,
            "args": result.args,
            "kwargs": result.kwargs,
            "backend": self.alias,
            "result": result.id,
        }
        if key is not None:
            call["unique_key"] = key
        limited = concurrency_of(self, task, result.args, result.kwargs)
        if limited is not None:
            call["concurrency"], call["concurrency_key"] = limited
        job = task_job()
        inline = settings.MODE == "inline"

        def record(job_id: object = None) -> TaskResultRecord:
            return TaskResultRecord.objects.using(settings.DATABASE).create(
                id=result.id,
                task_path=task.module_path,
                backend=self.alias,
                queue=task.queue_name,
                priority=task.priority,
                run_after=task.run_after,
                args=result.args,
                kwargs=result.kwargs,
                status=TaskResultStatus.READY,
                enqueued_at=enqueued_at,
                job_id="" if job_id is None else str(job_id),
                unique_key=key or "",
            )

        def push() -> Pushed:
            return job.enqueue((), call, at=task.run_after, queue=task.queue_name,
                               priority=task.priority)

        database = settings.DATABASE
        if inline:
            # The task runs at the push: its result must exist first.
            with transaction.atomic(using=database):
                saved = record()
                task_enqueued.send(sender=type(self), task_result=result)
                push()
                saved.refresh_from_db()
            return build_result(saved, task)
        if get_store().transactional_push:
            # The job and its result commit (or roll back) together.
            with transaction.atomic(using=database):
                pushed = push()
                if pushed.status == "duplicate":
                    return self._waiting(key) or result
                record(pushed.id)
        elif key is None and transaction.get_connection(database).in_atomic_block:
            # The store cannot join the transaction (Redis): the push goes to its
            # outbox in this transaction, with the result, and moves at the commit, or
            # at a worker's sweep if the store is down then. (A unique task needs the
            # store's answer at once: it is pushed at the commit, below.)
            with transaction.atomic(using=database):
                record()
                push()
        else:
            # The result first, so the worker finds it; the job once it is committed.
            saved = record()

            def push_now() -> Pushed:
                try:
                    pushed = push()
                except BaseException:
                    saved.delete()
                    raise
                if pushed.status == "duplicate":
                    saved.delete()
                elif pushed.id is not None:
                    type(saved).objects.using(database).filter(pk=saved.pk).update(
                        job_id=str(pushed.id)
                    )
                return pushed

            if transaction.get_connection(database).in_atomic_block:
                transaction.on_commit(push_now, using=database)
            elif push_now().status == "duplicate":
                return self._waiting(key) or result
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    def _waiting(self, key: str | None) -> TaskResult | None:
        from ..models import TaskResultRecord

        found = (
            TaskResultRecord.objects.using(settings.DATABASE)
            .filter(backend=self.alias, unique_key=key, status=TaskResultStatus.READY)
            .order_by("-enqueued_at")
            .first()
        )
        return None if found is None else build_result(found)

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


def laterite_backend(alias: str) -> LateriteBackend:
    """Return the backend of TASKS[alias]; a `laterite.task` job runs only through a
    LateriteBackend, so any other is a TypeError naming it."""
    backend = task_backends[alias]
    if not isinstance(backend, LateriteBackend):
        raise TypeError(f"TASKS[{alias!r}] is a {type(backend).__name__}, not a LateriteBackend.")
    return backend
