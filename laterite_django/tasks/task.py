"""`LateriteTask`: Django's Task with laterite's own options (tries, backoff, timeout,
unique_key, concurrency, concurrency_key, encrypt).

The backend's `task_class`: on Django 6.1 (and the backport) `@task(tries=5,
timeout=30)` passes these keyword arguments through to it. An option left
unset takes the backend's OPTIONS default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .compat import Task

__all__ = ["DEFAULT", "LateriteTask"]


class _Default:
    """The value of an option the task leaves to the backend's OPTIONS."""

    def __repr__(self) -> str:
        return "DEFAULT"

    def __reduce__(self) -> str:
        return "DEFAULT"  # pickles as this module's DEFAULT


DEFAULT: Any = _Default()


@dataclass(frozen=True, slots=True, kw_only=True)
class LateriteTask(Task):
    """A Task that also says how laterite runs it; each option defaults to OPTIONS."""

    # Attempts before the task fails; 0 = retry without end.
    tries: int = DEFAULT
    # Seconds before attempt n+1: a number, a list (last entry repeats) or callable(n).
    backoff: Any = DEFAULT
    # Seconds one attempt may run; None = no limit.
    timeout: float | None = DEFAULT
    # callable(*args, **kwargs) -> str or None: an enqueue while a task with the
    # same key waits returns that task's result instead of queuing another.
    unique_key: Callable[..., str | None] | None = None
    # At most this many of the task's calls run at once across every worker: per
    # `concurrency_key`, else per task (its module path). None = no limit.
    concurrency: int | None = DEFAULT
    # callable(*args, **kwargs) -> str or None, computed at enqueue: the key the
    # task's `concurrency` counts under (None: the task's module path).
    concurrency_key: Callable[..., str | None] | None = None
    # Its arguments stored encrypted (True: all; or a list of parameter names), and its
    # result's value: see tasks/encrypted.py.
    encrypt: bool | Sequence[str] = False
