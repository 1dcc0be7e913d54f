"""Pushes recorded instead of stored or run: what `testing.capture_jobs()` collects.

The captures open in the current context (a contextvar: this thread, or this
asyncio task) receive every push made there; other threads push as usual.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import payload
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


# The lists of the captures open in this context, outermost first.
_open: ContextVar[tuple[list[CapturedPush], ...]] = ContextVar("laterite_capture", default=())


@contextmanager
def capture_jobs() -> Iterator[list[CapturedPush]]:
    """Record the pushes made in this block instead of storing or running them.

    Yields the list the pushes are appended to, in order. Every push form
    counts (push, push_in, push_at, push_many and their `a` forms), in every
    mode, inline included; each returns `Pushed("queued", id=None)`. A push is
    still checked as usual (registered job, arguments that fit and encode).
    Nested captures each see the pushes made while they are open.
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
    for new in new_jobs:
        args, kwargs = payload.decode(new.payload)
        captured = CapturedPush(
            name=new.name, args=tuple(args), kwargs=dict(kwargs), queue=new.queue,
            at=new.available_at, unique_key=new.unique_key, priority=new.priority, job=job,
        )
        for pushed in captures:
            pushed.append(captured)
    return [Pushed("queued") for _ in new_jobs]
