"""Pushes recorded instead of stored or run: what `testing.capture_jobs()` collects.

The captures open in the current context (a contextvar: this thread, or this
asyncio task) receive every push made there; other threads push as usual.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from . import encryption
from .context import Pushed

if TYPE_CHECKING:
    from .core.values import NewJob
    from .jobs import JobFunction

__all__ = ["CapturedPush", "capture_jobs", "capturing", "record"]


@dataclass(frozen=True, slots=True)
class CapturedPush:
    """One push seen by `capture_jobs()`: the call as a worker would receive it."""

    name: str
    args: tuple[Any, ...]  # after the JSON round trip, as the job would get them
    kwargs: dict[str, Any]
    queue: str
    at: datetime  # when it would be due
    unique_key: str | None = None
    priority: int = 0
    job: JobFunction | None = field(default=None, repr=False, compare=False)
    # A debounced push: the latest `at` a later push with its key may give it (its
    # first push plus debounce_max; None: no such deadline).
    debounce_until: datetime | None = None
    debounced: bool = False  # whether it replaced an earlier captured push


# The lists of the captures open in this context, outermost first.
_open: ContextVar[tuple[list[CapturedPush], ...]] = ContextVar("laterite_capture", default=())


@contextmanager
def capture_jobs() -> Iterator[list[CapturedPush]]:
    """Record the pushes made in this block instead of storing or running them.

    Yields the list the pushes are appended to, in order. Every push form
    counts (push, push_in, push_at, push_many and their `a` forms), in every
    mode, inline included; each returns `Pushed("queued", id=None)`. A push is
    still checked as usual (registered job, arguments that fit and encode).
    Nested captures each see the pushes made while they are open. A debounced push
    replaces the earlier captured push with its key in place, as a store replaces the
    waiting job (its arguments, its `at` capped by the first's deadline), and returns
    `Pushed("queued", debounced=True)`.
    """
    pushed: list[CapturedPush] = []
    token = _open.set((*_open.get(), pushed))
    try:
        yield pushed
    finally:
        _open.reset(token)


def capturing() -> bool:
    """Whether a capture is open in the current context."""
    return bool(_open.get())


def record(job: JobFunction, new_jobs: Sequence[NewJob]) -> list[Pushed]:
    """Append `new_jobs` to every open capture; return what their pushes return."""
    captures = _open.get()
    results = []
    for new in new_jobs:
        args, kwargs, _ = encryption.open_arguments(new.payload)  # as a worker sees them
        captured = CapturedPush(
            name=new.name, args=tuple(args), kwargs=dict(kwargs), queue=new.queue,
            at=new.available_at, unique_key=new.unique_key, priority=new.priority, job=job,
        )
        if new.debounce is None:
            for pushed in captures:
                pushed.append(captured)
            results.append(Pushed("queued"))
            continue
        # Its deadline if it starts a run: its push plus debounce_max.
        until = (None if new.debounce_max is None
                 else new.pushed_at + timedelta(seconds=new.debounce_max))
        debounced = False
        for pushed in captures:
            debounced = _debounce(pushed, captured, until) or debounced
        results.append(Pushed("queued", debounced=debounced))
    return results


def _debounce(pushed: list[CapturedPush], captured: CapturedPush,
              until: datetime | None) -> bool:
    """Put debounced push `captured` in capture `pushed`: in place of the last captured
    push with its key, due no later than that one's deadline (True), else at the end
    with deadline `until`."""
    for index in range(len(pushed) - 1, -1, -1):
        earlier = pushed[index]
        if earlier.unique_key == captured.unique_key:
            deadline = earlier.debounce_until or until
            at = captured.at if deadline is None else min(captured.at, deadline)
            pushed[index] = replace(captured, at=at, debounce_until=deadline, debounced=True)
            return True
    pushed.append(replace(captured, debounce_until=until))
    return False
