"""One attempt of one task (`TaskRun`): start it, call it and record its outcome in its result.

Needs Django's Tasks framework (tasks.compat): the task job (runner.py), which a worker
imports without it, imports this module on first use.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from collections.abc import Callable
from inspect import iscoroutinefunction
from types import SimpleNamespace
from typing import Any

from django.utils import timezone

from ..context import JobContext
from ..core.rules import Action, Decision, JobOptions
from ..core.sizes import storable
from ..encryption import scrub
from ..exceptions import Cancelled, Fail, Snooze
from ..worker.attempt import WorkerStopped
from ..worker.execute import JobTimeout
from ..worker.loop import default_worker_name
from .compat import TaskContext, normalize_json, task_finished, task_started
from .encrypted import ScrubbedError, scrubbed, sealed_value, secrets_of
from .lookup import laterite_backend
from .results import WorkerLost, build_result, expiry, resolve_task, update_record

__all__ = ["TaskRun"]


def _worker_id() -> str:
    thread = threading.current_thread()
    if thread is threading.main_thread():
        return default_worker_name()
    return f"{default_worker_name()}/{thread.name}"


def _call(task: Any, task_result: Any, args: list, kwargs: dict) -> Any:
    if task.takes_context:
        args = [TaskContext(task_result=task_result), *args]
    if iscoroutinefunction(task.func):
        # Run in this thread, so a timeout (SIGALRM) interrupts the coroutine itself.
        return asyncio.run(task.func(*args, **kwargs))
    return task.func(*args, **kwargs)


class TaskRun:
    """One attempt of one task: start, call, and settle its result by the task's rules."""

    def __init__(
        self, path: str, args: list, kwargs: dict, alias: str, result_id: str | None,
        cx: JobContext,
    ) -> None:
        self.path = path
        self.args = args
        self.kwargs = kwargs
        self.alias = alias
        self.result_id = result_id
        self.cx = cx
        self.inline = cx.id is None
        self.task: Any = None
        # An encrypted task's arguments: what its errors are scrubbed of (encrypted.py).
        self.secrets: list[Any] = []
        self.sender: type = TaskRun
        self.ttl: float | None = None
        # A task pushed without a result (queue_push, say) is described in memory only.
        self.unsaved = SimpleNamespace(
            pk=f"job:{cx.id}", task_path=path, backend=alias, queue=cx.queue, priority=0,
            run_after=None, args=args, kwargs=kwargs, status="READY",
            enqueued_at=cx.pushed_at, started_at=None, last_attempted_at=None,
            finished_at=None, errors=[], worker_ids=[], return_value=None, expires_at=None,
        )

    @staticmethod
    def options(path: str, alias: str) -> JobOptions:
        """The tries, backoff and timeout of the task at module path `path` through the
        backend TASKS[alias]: the task's own, else the backend's. Raise ValueError
        saying why when either cannot be found."""
        try:
            backend = laterite_backend(alias)
            tries, backoff, timeout = backend.run_options(resolve_task(path))
        except Exception as e:
            raise ValueError(f"cannot run task {path!r}: {_summary(e)}") from e
        return JobOptions(tries=tries, backoff=backoff, timeout=timeout)

    def run(self) -> Any:
        try:
            self._backend()
            self.task = resolve_task(self.path)
        except Exception as e:
            self._record(self._failed(e))
            raise Fail(f"cannot run task {self.path!r}: {_summary(e)}") from e
        self.secrets = secrets_of(self.task, self.args, self.kwargs)
        task_result = self._start()
        task_started.send(sender=self.sender, task_result=task_result)
        try:
            value = _call(self.task, task_result, self.args, self.kwargs)
        except BaseException as e:
            if _stopping(e) or isinstance(e, Snooze):
                raise  # given back (after_settle undoes the start), or snoozed: no error
            if self.inline:
                self._finish(self._failed(e))
                raise
            # Retry or fail is the rules' to say; the error is recorded now, with its class.
            self._record(_errored(e, self.secrets))
            _raised.error = (self.cx.id, e, self.secrets)
            raise
        try:
            value = normalize_json(value)
        except BaseException as e:
            # A return value that is not JSON is final.
            error = f"{_summary(e)}\n\n{''.join(traceback.format_exception(e))}"
            self._record(_errored(e, self.secrets))
            raise Fail(error) from e
        self._finish(self._succeeded(value))
        return value

    def settled(self, decision: Decision) -> None:
        """Record how the worker settled this attempt in the task's result."""
        raised, self.secrets = _take_raised(self.cx.id)
        if decision.action is Action.DELETE:
            return  # recorded by run() as it returned
        self._backend()
        if decision.action is Action.GIVE_BACK:
            self._record(_undo_start)
        elif decision.action in (Action.RELEASE, Action.SNOOZE):
            self._record(_ready)
        else:
            reason = decision.error.split("\n", 1)[0]
            error: BaseException = WorkerLost(reason)
            if reason.startswith("JobTimeout"):
                error = JobTimeout()
                error.args = (reason.removeprefix("JobTimeout: "),)
            elif reason.startswith("Cancelled"):  # killed past its grace by the supervisor
                error = Cancelled(reason.removeprefix("Cancelled: "))
            # Django's task_finished handler logs a failure with logger.exception: it is
            # sent inside an except block, so the log shows the task's own traceback
            # (or, when no error of this process ended it, the reason's).
            try:
                raise raised or error
            except BaseException as e:
                self._finish(self._failed(e, record_error=self._unrecorded))

    def _unrecorded(self, record: Any) -> bool:
        """Whether this attempt's error is not in the result yet (the task never ran,
        or its process died): then the rules' reason is recorded."""
        return len(record.errors) < self.cx.attempt

    def _backend(self) -> None:
        backend = laterite_backend(self.alias)
        self.sender = type(backend)
        self.ttl = backend.result_ttl

    # -- the result -----------------------------------------------------------------

    def _record(self, change: Callable[[Any], None]) -> Any:
        """Apply `change` to the stored result (or the unsaved one); return it."""
        if self.result_id is None:
            change(self.unsaved)
            return self.unsaved
        return update_record(self.result_id, change)

    def _result(self, record: Any) -> Any:
        return build_result(record, self.task)

    def _start(self) -> Any:
        now = timezone.now()
        worker = _worker_id()

        def change(record: Any) -> None:
            record.status = "RUNNING"
            record.started_at = record.started_at or now
            record.last_attempted_at = now
            record.finished_at = None
            record.expires_at = None
            record.worker_ids = [*record.worker_ids, worker]

        record = self._record(change)
        if record is None:  # pruned meanwhile: carry on without it
            self.result_id = None
            record = self._record(change)
        return self._result(record)

    def _failed(
        self, error: BaseException, record_error: Callable[[Any], bool] = lambda record: True
    ) -> Callable[[Any], None]:
        entry = _error_entry(error, self.secrets)

        def add_error(record: Any) -> None:
            if record_error(record):
                record.errors = [*record.errors, entry]

        return self._ended("FAILED", add_error)

    def _succeeded(self, value: Any) -> Callable[[Any], None]:
        if getattr(self.task, "encrypt", False):
            value = sealed_value(value)  # opened where the result is read

        def keep_value(record: Any) -> None:
            record.return_value = value

        return self._ended("SUCCESSFUL", keep_value)

    def _ended(self, status: str, then: Callable[[Any], None]) -> Callable[[Any], None]:
        """The change that ends a result with `status`, now, to expire after the task's
        result lifetime; `then` adds what this ending keeps (its error, its value)."""
        ttl = self.ttl

        def change(record: Any) -> None:
            now = timezone.now()
            record.status = status
            record.finished_at = now
            record.expires_at = expiry(now, ttl)
            then(record)

        return change

    def _finish(self, change: Callable[[Any], None]) -> None:
        """Record the outcome and send task_finished.

        On failure this runs inside the except block, as in Django's own
        backends, so the framework's log line carries the traceback.
        """
        record = self._record(change) or self._record_unsaved(change)
        raised = sys.exc_info()[1]
        if raised is None or not self.secrets:
            task_finished.send(sender=self.sender, task_result=self._result(record))
            return
        # Django's handler logs the exception being handled: an encrypted task's is
        # logged scrubbed of its arguments, in its place.
        try:
            raise scrubbed(raised, self.secrets) from None
        except ScrubbedError:
            task_finished.send(sender=self.sender, task_result=self._result(record))

    def _record_unsaved(self, change: Callable[[Any], None]) -> Any:
        self.result_id = None
        return self._record(change)


# What the task of this thread's last attempt raised, by job id, until the worker
# settles that attempt (`TaskRun.settled`, in the same thread right after).
_raised = threading.local()


def _take_raised(job_id: int | str | None) -> tuple[BaseException | None, list[Any]]:
    """Return what the task of job `job_id` raised in this thread's last attempt and
    the values its error is scrubbed of, and forget them."""
    found = getattr(_raised, "error", None)
    _raised.error = None
    if found is None or found[0] != job_id:
        return None, []
    return found[1], found[2]


def _undo_start(record: Any) -> None:
    """Give the attempt back: the worker returns the job to its queue uncounted."""
    record.status = "READY"
    record.worker_ids = record.worker_ids[:-1]


def _errored(error: BaseException, secrets: list[Any]) -> Callable[[Any], None]:
    entry = _error_entry(error, secrets)

    def change(record: Any) -> None:
        record.errors = [*record.errors, entry]

    return change


def _ready(record: Any) -> None:
    """Released for another attempt."""
    record.status = "READY"


def _error_entry(error: BaseException, secrets: list[Any]) -> dict[str, str]:
    kind = type(error)
    text = "".join(traceback.format_exception(error))
    return {
        "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
        # Escaped as a job's error is (a NUL, a lone surrogate): the database refuses
        # them, and the attempt's real error would be lost behind that refusal. An
        # encrypted task's scrubbed of its arguments.
        "traceback": storable(scrub(text, secrets)),
    }


def _stopping(error: BaseException) -> bool:
    """Whether `error` stops the worker (the attempt is given back, not failed)."""
    return isinstance(error, KeyboardInterrupt | GeneratorExit | WorkerStopped)


def _summary(error: BaseException) -> str:
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}: {error}".removeprefix("builtins.")
