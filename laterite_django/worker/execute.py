"""Call a job's function with its arguments and context, under a time limit."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # the C module under `signal`
import asyncio
import ctypes
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

from asgiref.sync import ThreadSensitiveContext, async_to_sync, sync_to_async
from django.db import connections

from ..context import JobContext
from ..exceptions import Cancelled

if TYPE_CHECKING:
    from ..jobs import JobFunction

__all__ = [
    "JobTimeout", "Ran", "call_job", "in_this_thread", "interrupt", "run_here", "run_job",
    "time_limit_passed",
]


class JobTimeout(BaseException):
    """Raised inside a job that ran past its timeout.

    A BaseException, so a job's own `except Exception` cannot swallow it.
    """

    def __init__(self, seconds: float | None = None) -> None:
        super().__init__("timed out" if seconds is None else f"timed out after {seconds:g} s")
        self.seconds = seconds


_loops = threading.local()
_here: ContextVar[bool] = ContextVar("laterite_in_this_thread", default=False)


@contextmanager
def in_this_thread() -> Iterator[None]:
    """Run async jobs so that their thread-sensitive calls (their ORM queries) come
    back to this thread, on the caller's connection and in its transaction, as
    Django's async tests do: inline mode and `testing.run_jobs()`."""
    token = _here.set(True)
    try:
        yield
    finally:
        _here.reset(token)


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
    if _here.get():
        return async_to_sync(job.func)(*args, **kwargs)
    runner = _runner()
    tasks: list[asyncio.Task] = []

    async def main() -> Any:
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        return await _in_own_thread(job.func(*args, **kwargs))

    try:
        return runner.run(main())
    except BaseException:
        if tasks and not tasks[0].done():
            # Interrupted from outside (a timeout, a stop): the job may wait on a
            # thread that never returns, and closing the loop would wait for it.
            # Leave that loop and its thread behind; the next job gets a new loop.
            _loops.runner = None
            _left_behind.append(job.name)
        raise


def run_here(
    job: JobFunction, args: Sequence[Any], kwargs: Mapping[str, Any], cx: JobContext
) -> Any:
    """Run `job` now in this thread, its async ORM calls back on this thread's connection:
    the inline mode's run (registered by ready())."""
    with in_this_thread():
        return call_job(job, args, kwargs, cx)


# Jobs whose threads were left running past their timeout (see `stuck_threads`).
_left_behind: list[str] = []


def stuck_threads() -> list[threading.Thread]:
    """Threads a timed-out async job left running that would hold up the exit.

    Python joins executor threads at exit; a worker process with such a
    thread leaves with os._exit() instead of waiting for it (see queue_work).
    """
    if not _left_behind:
        return []
    return [t for t in threading.enumerate()
            if t is not threading.current_thread() and not t.daemon and t.is_alive()]


async def _in_own_thread(coroutine: Any) -> Any:
    """Await the job, its ORM calls in a thread of its own, then close their connections.

    Each job's `sync_to_async` calls run in a thread for that job
    (ThreadSensitiveContext), so one stuck past its timeout holds up no later
    job; its connections are closed when the job ends.
    """
    async with ThreadSensitiveContext():
        try:
            return await coroutine
        finally:
            await sync_to_async(connections.close_all)()


# Seconds between repeated JobTimeouts once a job's limit has passed: a job that
# catches one (even with `except BaseException`) is interrupted again, and its
# attempt is recorded as timed out whatever it returns.
REPEAT = 1.0
# A timeout that lands in the worker's own frames around the call is put off
# this long, so it never fires after the job has returned.
DEFER = 0.005


@dataclass(slots=True)
class Ran:
    """What running a job gave: its result, or what it raised, and whether it timed out."""

    result: Any = None
    error: BaseException | None = None
    timed_out: bool = False


class _Alarm:
    """The time limit of the job running in the main thread; `seconds` is None between jobs."""

    seconds: float | None = None
    fired = False
    cx: JobContext | None = None  # the running job's, while it runs (a cancel reads it)


_alarm = _Alarm()


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    cx = _alarm.cx
    if cx is not None and cx.cancel_watch is not None and cx.cancel_watch.interrupt:
        if frame is not None and frame.f_code in _SHIELDED:
            signal.setitimer(signal.ITIMER_REAL, DEFER)
            return
        signal.setitimer(signal.ITIMER_REAL, REPEAT)
        raise Cancelled("cancelled, and did not stop within its grace")
    if _alarm.seconds is None:
        return
    if frame is not None and frame.f_code in _SHIELDED:
        # Between arming and the call, or between the return and disarming.
        signal.setitimer(signal.ITIMER_REAL, DEFER)
        return
    _alarm.fired = True
    signal.setitimer(signal.ITIMER_REAL, REPEAT)
    raise JobTimeout(_alarm.seconds)


def run_job(
    job: JobFunction,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    cx: JobContext,
    timeout: float | None,
) -> Ran:
    """Run `job` under `timeout`; never raise: what it raised is in `Ran.error`.

    The attempt counts as timed out if its limit passed while it ran, even if
    the job caught the JobTimeout and returned.
    """
    if threading.current_thread() is not threading.main_thread():
        # The partial adds no frame (it is called in C): the timer finds call_job's frame
        # right above _run_in_thread's, both shielded.
        return _run_in_thread(partial(call_job, job, args, kwargs, cx), cx, timeout)
    ran = Ran()
    # The handler stays installed between jobs (swapping it twice per job costs more
    # than many a job); it raises only while a limit is armed or a cancel is due.
    # (`_signal.getsignal`: `signal.getsignal` also tries the handler as an enum
    # member, which costs more than the whole check.)
    if (timeout or cx.cancel_watch is not None) and _signal.getsignal(
            signal.SIGALRM) is not _on_alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
    if timeout:
        _alarm.fired = False
        _alarm.seconds = timeout
        signal.setitimer(signal.ITIMER_REAL, timeout)
    _alarm.cx = cx
    try:
        ran.result = call_job(job, args, kwargs, cx)
    except BaseException as error:
        ran.error = error
    finally:
        _alarm.cx = None
        watch = cx.cancel_watch
        if watch is not None:
            watch.running = False
        if timeout or (watch is not None and watch.interrupt):
            signal.setitimer(signal.ITIMER_REAL, 0)
        if timeout:
            _alarm.seconds = None
            ran.timed_out = _alarm.fired
    return ran


def interrupt(watch: Any) -> None:
    """Raise Cancelled in the job `watch` belongs to (a `flow.cancel.CancelWatch`): it was
    cancelled and did not stop within its grace. Called from the heartbeat thread.

    In the main thread this goes through SIGALRM as a timeout does (and repeats
    every REPEAT seconds); in another thread (the `worker` mode) the exception is
    set in that thread. Code stuck in C is not interrupted either way.
    """
    watch.interrupt = True
    if watch.thread_id == threading.main_thread().ident:
        cx = _alarm.cx
        if cx is not None and cx.cancel_watch is watch:
            signal.setitimer(signal.ITIMER_REAL, DEFER)
        return
    frame = sys._current_frames().get(watch.thread_id)
    if watch.running and frame is not None and frame.f_code not in _SHIELDED:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(watch.thread_id), ctypes.py_object(Cancelled))


def _run_in_thread(call: Callable[[], Any], cx: JobContext, timeout: float | None) -> Ran:
    """`run_job` off the main thread (the `worker` mode), `call` being its call_job:
    no signals there.

    A timer thread raises JobTimeout in this thread at its next bytecode, and
    again every REPEAT seconds, but only while the job's own code runs. Code
    stuck in C is not interrupted: `queue_work --processes N` is the hard stop.
    """
    ran = Ran()
    target = threading.get_ident()
    state = {"armed": True}
    lock = threading.Lock()

    def interrupt() -> None:
        with lock:
            if not state["armed"]:
                return
            frame = sys._current_frames().get(target)
            if frame is not None and frame.f_code in _SHIELDED:
                again = DEFER
            else:
                ran.timed_out = True
                again = REPEAT
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(target), ctypes.py_object(JobTimeout)
                )
            timer = threading.Timer(again, interrupt)
            timer.daemon = True
            timer.start()

    if timeout:
        timer = threading.Timer(timeout, interrupt)
        timer.daemon = True
        timer.start()
    try:
        ran.result = call()
    except BaseException as error:
        ran.error = error
    finally:
        if cx.cancel_watch is not None:
            cx.cancel_watch.running = False
        if timeout:
            # A JobTimeout set just before disarming is delivered here, in our
            # frame (the loop's backward jumps let it in), not later in the worker.
            try:
                with lock:
                    state["armed"] = False
                for _ in range(3):
                    pass
            except JobTimeout:
                ran.timed_out = True
    return ran


def time_limit_passed(ran: Ran) -> bool:
    """Whether the attempt counts as timed out."""
    return ran.timed_out or isinstance(ran.error, JobTimeout)


_SHIELDED = {run_job.__code__, _run_in_thread.__code__, call_job.__code__}
