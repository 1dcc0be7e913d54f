"""A Task's concurrency limit: `@task(concurrency=N, concurrency_key=...)`, or the
backend's OPTIONS["CONCURRENCY"] for every task that sets none.

As for `@job(concurrency=...)` (see flow/limits.py): at most N of the task's calls
run at once across every worker, per `concurrency_key(*args, **kwargs)`, or per
task (its module path) without a key or when the key is None. The key is computed
at enqueue and stored with the job, so the store's claim enforces the limit; the
limit and key also travel in the `laterite.task` job's call, so a task retried from
the failed list runs under the same limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.sizes import UNIQUE_KEY_MAX, too_long
from ..flow.limits import note_limited_task
from .compat import InvalidTask
from .task import DEFAULT

if TYPE_CHECKING:
    from .backend import LateriteBackend
    from .compat import Task

__all__ = ["concurrency_of", "concurrency_problem", "validate_limit"]


def concurrency_problem(value: Any) -> str | None:
    """Say what is wrong with a concurrency value (own or OPTIONS'), or return None."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return None
    return f"must be an integer >= 1 or None (no limit), got {value!r}"


def _limit(backend: LateriteBackend, task: Task) -> Any:
    own = getattr(task, "concurrency", DEFAULT)
    return backend.concurrency if own is DEFAULT else own


def validate_limit(backend: LateriteBackend, task: Task) -> None:
    """Refuse a task's bad concurrency options, naming the value; note a limited task,
    so this process's claims are the limited ones (flow.limits.any_job_limited)."""
    label = f"Task {task.module_path!r}"
    limit = _limit(backend, task)
    problem = concurrency_problem(limit)
    if problem:
        source = ("the backend's OPTIONS['CONCURRENCY']"
                  if getattr(task, "concurrency", DEFAULT) is DEFAULT else "concurrency")
        raise InvalidTask(f"{label}: {source} {problem}.")
    make_key = getattr(task, "concurrency_key", None)
    if make_key is not None and (limit is None or not callable(make_key)):
        raise InvalidTask(
            f"{label}: concurrency_key must be callable(*args, **kwargs) -> str or None, and "
            f"goes with a concurrency limit; got {make_key!r}."
        )
    if limit is not None:
        note_limited_task(task.module_path)


def concurrency_of(backend: LateriteBackend, task: Task, args: Sequence[Any],
                   kwargs: Mapping[str, Any]) -> tuple[int, str] | None:
    """(limit, key) of one call of `task`, or None if it runs unlimited.

    Raise TypeError or ValueError, naming the task, if its concurrency_key returns
    something other than a str or None, or a key too long to store.
    """
    limit = _limit(backend, task)
    if limit is None:
        return None
    make_key = getattr(task, "concurrency_key", None)
    key = None if make_key is None else make_key(*args, **kwargs)
    if key is None:
        return limit, task.module_path
    if not isinstance(key, str):
        raise TypeError(f"Task {task.module_path!r}: concurrency_key returned {key!r}; it must "
                        f"return a str or None.")
    problem = too_long("the concurrency_key", key, UNIQUE_KEY_MAX)
    if problem:
        raise ValueError(f"Task {task.module_path!r}: {problem}.")
    return limit, key
