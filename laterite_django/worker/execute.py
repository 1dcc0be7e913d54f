"""Call a job's function with its arguments and context, under a time limit."""

from __future__ import annotations

import asyncio
import ctypes
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import connections

from ..context import JobContext

if TYPE_CHECKING:
    from ..jobs import JobFunction

__all__ = ["JobTimeout", "call_job", "time_limit"]


class JobTimeout(BaseException):
    """Raised inside a job that ran past its timeout.

    A BaseException, so a job's own `except Exception` cannot swallow it.
    """

    def __init__(self, seconds: float | None = None) -> None:
        super().__init__("timed out" if seconds is None else f"timed out after {seconds:g} s")
        self.seconds = seconds


_loops = threading.local()


def _runner() -> asyncio.Runner:
    runner = getattr(_loops, "runner", None)
    if runner is None:
        runner = _loops.runner = asyncio.Runner()
    return runner


def call_job(
    job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any], cx: JobContext
) -> Any:
    """Run `job` with these arguments (and `cx` if it asks for it); return its result."""
    if job.takes_cx:
        kwargs = {**kwargs, "cx": cx}
    if not job.is_async:
        return job.func(*args, **kwargs)
    runner = _runner()
    try:
        return runner.run(_closing_connections(job.func(*args, **kwargs)))
    except BaseException:
        # A loop interrupted mid-run (timeout, shutdown) is not reused.
        runner.close()
        _loops.runner = None
        raise


async def _closing_connections(coroutine: Any) -> Any:
    """Await the job, then close the connections its ORM calls opened.

    Django runs an async job's ORM calls in a thread of its own; without this
    each of those threads would keep a connection open after the job.
    """
    try:
        return await coroutine
    finally:
        await sync_to_async(connections.close_all)()


class _Alarm:
    """The time limit of the job running in the main thread, None between jobs."""

    seconds: float | None = None


_alarm = _Alarm()


def _on_alarm(signum: int, frame: object) -> None:
    if _alarm.seconds is not None:
        raise JobTimeout(_alarm.seconds)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise JobTimeout in this thread if the block runs longer than `seconds`.

    In the main thread SIGALRM interrupts even a blocking sleep; in other
    threads (the `worker` mode) the exception is delivered at the next
    bytecode, which cannot interrupt C code: the process supervisor is the
    hard stop there.
    """
    if not seconds:
        yield
        return
    if threading.current_thread() is threading.main_thread():
        # The handler stays installed between jobs (swapping it twice per job
        # costs more than many a job); it raises only while an alarm is armed.
        if signal.getsignal(signal.SIGALRM) is not _on_alarm:
            signal.signal(signal.SIGALRM, _on_alarm)
        _alarm.seconds = seconds
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            _alarm.seconds = None
        return
    target = threading.get_ident()
    done = threading.Event()

    def interrupt() -> None:
        if not done.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(target), ctypes.py_object(JobTimeout)
            )

    timer = threading.Timer(seconds, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        done.set()
        timer.cancel()
