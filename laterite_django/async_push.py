"""Pushing from async code: `apush`, `apush_in`, `apush_at`, `apush_many` on every job,
and the guard that keeps a plain `push()` off a running event loop.

An async push checks and encodes the call on the loop (no I/O), then hands it to
the store through `sync_to_async(thread_sensitive=True)`, as Django's own async
ORM methods do: the database store writes on the connection, and in the
transaction, that the calling context's ORM calls use; the Redis store's push
runs in that thread too, so the loop never waits on the network.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from . import capture, inline
from .conf import settings
from .context import Pushed
from .exceptions import PushFromEventLoop
from .push_checks import DEBOUNCE_NAMES, split_debounce

if TYPE_CHECKING:
    from .core.values import NewJob

__all__ = ["AsyncPushes", "refuse_event_loop", "running_loop"]

# The event loop running in this thread, or None: asyncio's own look-up, which returns
# None where get_running_loop() raises (a raise costs a push a microsecond).
running_loop = asyncio._get_running_loop

P = ParamSpec("P")
R = TypeVar("R")


def refuse_event_loop(name: str) -> None:
    """Raise PushFromEventLoop if an event loop runs in this thread (a plain push
    there would block it), unless DJANGO_ALLOW_ASYNC_UNSAFE is set, as Django allows."""
    if running_loop() is None:
        return
    if os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE"):
        return
    raise PushFromEventLoop(
        f"Job {name!r} was pushed with a plain push from async code, which would block "
        f"the event loop: use `await job.apush(...)` (or apush_in, apush_at, apush_many)."
    )


class AsyncPushes(Generic[P, R]):
    """The `a` push methods of JobFunction: the same meaning as push, push_in, push_at
    and push_many, awaited."""

    if TYPE_CHECKING:
        name: str
        func: Any
        is_async: bool
        takes_cx: bool

        def new_jobs(
            self, calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]], *,
            at: datetime | None = None, queue: str | None = None, priority: int | None = None,
            delay: float = 0.0, debounce: Mapping[str, Any] | None = None,
        ) -> list[NewJob]: ...
        def store_jobs(self, new_jobs: Sequence[NewJob]) -> list[Pushed]: ...
        def store_debounced(self, new_jobs: Sequence[NewJob]) -> list[Pushed]: ...
        def _refuse_debounce(self, form: str) -> None: ...
        def _seconds(self, delay: timedelta | float) -> float: ...
        def _checked_when(self, when: datetime) -> datetime: ...
        def _pairs(self, calls: Iterable[Any]) -> list[tuple[Sequence[Any], Mapping[str, Any]]]:
            ...

    async def apush(self, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """`push()` for async code (debounce options included)."""
        if kwargs and not DEBOUNCE_NAMES.isdisjoint(kwargs):
            job_kwargs, given = split_debounce(kwargs)
            return (await self._astore(self.new_jobs([(args, job_kwargs)], debounce=given)))[0]
        return (await self.aenqueue_many([(args, kwargs)]))[0]

    async def apush_in(
        self, delay: timedelta | float, /, *args: P.args, **kwargs: P.kwargs
    ) -> Pushed:
        """`push_in()` for async code."""
        if kwargs and not DEBOUNCE_NAMES.isdisjoint(kwargs):
            self._refuse_debounce("push_in")
        return (await self._astore(self.new_jobs([(args, kwargs)],
                                                 delay=self._seconds(delay))))[0]

    async def apush_at(self, when: datetime, /, *args: P.args, **kwargs: P.kwargs) -> Pushed:
        """`push_at()` for async code."""
        if kwargs and not DEBOUNCE_NAMES.isdisjoint(kwargs):
            self._refuse_debounce("push_at")
        return (await self.aenqueue_many([(args, kwargs)], at=self._checked_when(when)))[0]

    async def apush_many(self, calls: Iterable[Any]) -> list[Pushed]:
        """`push_many()` for async code."""
        return await self.aenqueue_many(self._pairs(calls))

    async def aenqueue(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], *, at: datetime | None = None,
        queue: str | None = None, priority: int | None = None,
    ) -> Pushed:
        """`enqueue()` for async code."""
        return (await self.aenqueue_many([(args, kwargs)], at=at, queue=queue,
                                         priority=priority))[0]

    async def aenqueue_many(
        self, calls: Sequence[tuple[Sequence[Any], Mapping[str, Any]]], *,
        at: datetime | None = None, queue: str | None = None, priority: int | None = None,
    ) -> list[Pushed]:
        """`enqueue_many()` for async code; inline mode runs each job here, awaited."""
        return await self._astore(self.new_jobs(calls, at=at, queue=queue, priority=priority))

    async def _astore(self, new_jobs: list[NewJob]) -> list[Pushed]:
        """Store checked jobs (store_jobs, in a thread); inline mode runs each here."""
        if capture.capturing():
            return capture.record(self, new_jobs)  # type: ignore[arg-type]
        if settings.MODE == "inline":
            return [await inline.arun(self, new) for new in new_jobs]  # type: ignore[arg-type]
        if new_jobs and new_jobs[0].debounce is not None:  # all debounced, or none
            return await sync_to_async(self.store_debounced, thread_sensitive=True)(new_jobs)
        return await sync_to_async(self.store_jobs, thread_sensitive=True)(new_jobs)
