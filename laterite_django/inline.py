"""The `inline` mode: a push runs its job at once, here, on what a worker would see.

No retries, no timeout, nothing stored: what the job raises, the push raises.
An async job's ORM calls come back to the pushing code's thread, so they use its
connection and transaction, as the sync job's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from . import encryption
from .context import JobContext, Pushed

if TYPE_CHECKING:
    from .core.values import NewJob
    from .jobs import JobFunction

__all__ = ["arun", "run", "set_runner"]

# Runs a job's function here, with its arguments and context, and returns its result:
# the worker's (worker.execute), which sits above the push, set at start-up (apps.ready).
_run_here: Callable[[JobFunction, list[Any], dict[str, Any], JobContext], Any] | None = None


def set_runner(run: Callable[[JobFunction, list[Any], dict[str, Any], JobContext], Any]) -> None:
    """Register how `run` calls a job's function from sync code (called by ready())."""
    global _run_here
    _run_here = run


def _call(job: JobFunction, new: NewJob) -> tuple[list[Any], dict[str, Any], JobContext]:
    args, kwargs, _ = encryption.open_arguments(new.payload)  # what a worker would see
    cx = JobContext(id=None, name=job.name, queue=new.queue, attempt=1, pushed_at=new.pushed_at)
    return args, kwargs, cx


def run(job: JobFunction, new: NewJob) -> Pushed:
    """Run `new` now (from sync code)."""
    if _run_here is None:
        raise RuntimeError("laterite_django is not ready: is it in INSTALLED_APPS?")
    return Pushed("ran", result=_run_here(job, *_call(job, new)))


async def arun(job: JobFunction, new: NewJob) -> Pushed:
    """Run `new` now (from async code): an async job awaited here, a plain one in the
    thread Django's async ORM calls use (`sync_to_async`)."""
    args, kwargs, cx = _call(job, new)
    if job.takes_cx:
        kwargs = {**kwargs, "cx": cx}
    if job.is_async:
        return Pushed("ran", result=await job.func(*args, **kwargs))
    result = await sync_to_async(job.func, thread_sensitive=True)(*args, **kwargs)
    return Pushed("ran", result=result)
