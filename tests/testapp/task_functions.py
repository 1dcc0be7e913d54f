"""Tasks for the Tasks-framework tests (no tests here): the worker imports them by path.

Each records what it did in the `Record` table; the task signals are recorded
too, so tests can see what a worker process sent.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time

import pytest

from laterite_django import Fail, Snooze
from tests.testapp.models import Record

pytest.importorskip(
    "laterite_django.tasks.compat",
    reason="needs Django's Tasks framework: Django 6+, or the django-tasks backport",
    exc_type=ImportError,
)
from laterite_django.tasks.compat import TaskContext, task, task_finished, task_started

# Django 6.1 and the backport pass @task(**kwargs) to the backend's task class.
TASK_OPTIONS = "kwargs" in inspect.signature(task).parameters


def _record(kind: str, value: str = "", attempt: int = 0) -> None:
    Record.objects.create(kind=kind, value=value, attempt=attempt, pid=os.getpid())


def with_options(**options):
    """@task(**options) where the framework passes them on, else a plain @task()."""
    return task(**options) if TASK_OPTIONS else task()


def _on_started(sender, task_result, **kwargs) -> None:
    _record("signal-started", f"{task_result.id}:{task_result.status}", task_result.attempts)


def _on_finished(sender, task_result, **kwargs) -> None:
    _record("signal-finished", f"{task_result.id}:{task_result.status}", task_result.attempts)


task_started.connect(_on_started, dispatch_uid="laterite-tests-started")
task_finished.connect(_on_finished, dispatch_uid="laterite-tests-finished")


@task()
def noop(*args, **kwargs) -> None:
    return None


@task()
async def noop_async(*args, **kwargs) -> None:
    await asyncio.sleep(0)


@task()
def add(a: int, b: int) -> int:
    return a + b


@task()
async def add_async(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task()
def echo(value):
    return value


@task()
def record(value: str) -> str:
    _record("task", value)
    return value


@task(queue_name="mail")
def record_mail(value: str) -> str:
    _record("task-mail", value)
    return value


@task(takes_context=True)
def with_context(context, value: str) -> dict:
    assert isinstance(context, TaskContext)
    _record("context", value, context.attempt)
    return {"id": context.task_result.id, "attempt": context.attempt, "value": value}


@task(takes_context=True)
def flaky(context, value: str, succeed_on: int) -> int:
    """Fail until attempt `succeed_on` (the backend's OPTIONS give 2 tries)."""
    _record("flaky", value, context.attempt)
    if context.attempt < succeed_on:
        raise RuntimeError(f"flaky attempt {context.attempt}")
    return context.attempt


@task()
def failing(message: str) -> None:
    raise ValueError(message)


@task()
def failing_unstorably(message: str) -> None:
    """Fails with a message no database keeps as it is: a NUL and a lone surrogate."""
    raise ValueError(f"{message}\0\ud800")


@task()
def exits() -> None:
    raise SystemExit("This task failed due to SystemExit")


@task()
def fails_now(value: str) -> None:
    _record("fails-now", value)
    raise Fail(f"no such thing: {value}")


@task()
def bad_return():
    return object()


@with_options(tries=4, backoff=[0])
def flaky_four(value: str, succeed_on: int) -> int:
    """Count attempts in Record; tries=4 from @task (Django 6.1+ and the backport)."""
    attempt = Record.objects.filter(kind="flaky-four", value=value).count() + 1
    _record("flaky-four", value, attempt)
    if attempt < succeed_on:
        raise RuntimeError(f"attempt {attempt}")
    return attempt


@with_options(tries=1)
def fails_first_time(value: str) -> str:
    """Fail the first time it ever runs for `value`; succeed afterwards."""
    seen = Record.objects.filter(kind="first-time", value=value).exists()
    _record("first-time", value)
    if not seen:
        raise RuntimeError(f"first time for {value}")
    return f"ok {value}"


@with_options(timeout=0.5, tries=1)
def too_slow(seconds: float) -> None:
    _record("slow-start", str(seconds))
    time.sleep(seconds)
    _record("slow-end", str(seconds))


@with_options(timeout=0.5, tries=1)
def stuck_in_c(seconds: int) -> None:
    """Sleep in libc with every signal blocked: only the supervisor's kill ends it."""
    import ctypes
    import signal

    _record("stuck-task-start", str(seconds))
    signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL,
                                                                     signal.SIGSTOP})
    ctypes.CDLL(None).sleep(seconds)
    _record("stuck-task-end", str(seconds))


@with_options(timeout=None, tries=3)
def stuck_in_c_untimed(seconds: int) -> None:
    """As stuck_in_c, with no time limit and tries left: only a cancel ends it."""
    stuck_in_c.func(seconds)


@with_options(unique_key=lambda user_id: f"task-user:{user_id}")
def unique_per_user(user_id: int) -> int:
    _record("unique-task", str(user_id))
    return user_id


@task()
def nap(seconds: float, value: str) -> str:
    """Record its start, sleep, record its end (stop-signal tests)."""
    _record("nap-start", value)
    time.sleep(seconds)
    _record("nap-end", value)
    return value


@task()
def snoozing(value: str, times: int) -> str:
    """Snooze (0 s) `times` times, then return `value`."""
    _record("task-snoozing", value)
    if Record.objects.filter(kind="task-snoozing", value=value).count() <= times:
        raise Snooze(0)
    return value


# Tasks whose arguments are stored encrypted (tests/tasks/test_tasks_encrypted.py).
@with_options(encrypt=True, tries=1)
def enc_welcome(user_id: int, email: str, token: str = "") -> dict:
    """Record its arguments as it got them; fail for an address starting with 'fail',
    quoting it; return a value made of them."""
    _record("enc-task", f"{user_id}|{email}|{token}")
    if email.startswith("fail"):
        raise ValueError(f"cannot reach {email!r}")
    return {"greeting": f"hello {email}"}


@with_options(encrypt=["email"], unique_key=lambda user_id, email: f"u-{email}")
def enc_named(user_id: int, email: str) -> int:
    """Only `email` encrypted; unique per e-mail address."""
    _record("enc-task-named", f"{user_id}|{email}")
    return user_id
