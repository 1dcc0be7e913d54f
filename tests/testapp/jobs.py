"""Jobs the test suite pushes; each records what it did in the `Record` table."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta

from laterite_django import Fail, JobContext, Retry, job

from .models import Record


def _record(kind: str, value: str = "", attempt: int = 0) -> None:
    Record.objects.create(kind=kind, value=value, attempt=attempt, pid=os.getpid())


@job("tests.noop")
def noop(i: int = 0) -> None:
    """Do nothing, fast (drain tests)."""


@job("tests.record")
def record(value: str, cx: JobContext) -> str:
    _record("record", value, cx.attempt)
    return value


@job("tests.add")
def add(a: int, b: int) -> int:
    return a + b


@job("tests.flaky", tries=3, backoff=0)
def flaky(value: str, succeed_on: int, cx: JobContext) -> None:
    """Fail until attempt `succeed_on`, then record success."""
    _record("flaky-attempt", value, cx.attempt)
    if cx.attempt < succeed_on:
        raise RuntimeError(f"flaky attempt {cx.attempt}")
    _record("flaky-ok", value, cx.attempt)


@job("tests.retry_explicit", tries=2, backoff=[0])
def retry_explicit(value: str, delay: float | None, cx: JobContext) -> None:
    _record("retry-explicit", value, cx.attempt)
    if cx.attempt == 1:
        raise Retry("not yet", delay=delay)


@job("tests.fail_now", tries=5)
def fail_now(value: str, cx: JobContext) -> None:
    _record("fail-now", value, cx.attempt)
    raise Fail(f"no such thing: {value}")


@job("tests.always_broken", tries=2, backoff=0)
def always_broken(value: str, cx: JobContext) -> None:
    _record("broken", value, cx.attempt)
    raise ValueError(f"broken {value}")


@job("tests.windowed", tries=1, backoff=0.05, retry_until=timedelta(seconds=0.6))
def windowed(value: str, cx: JobContext) -> None:
    _record("windowed", value, cx.attempt)
    raise RuntimeError("still failing")


@job("tests.unlimited", tries=0, backoff=0)
def unlimited(value: str, succeed_on: int, cx: JobContext) -> None:
    _record("unlimited", value, cx.attempt)
    if cx.attempt < succeed_on:
        raise RuntimeError("again")


@job("tests.slow", timeout=0.5, tries=1)
def slow(seconds: float, cx: JobContext) -> None:
    _record("slow-start", str(seconds), cx.attempt)
    time.sleep(seconds)
    _record("slow-end", str(seconds), cx.attempt)


@job("tests.spin", timeout=0.5, tries=1)
def spin(cx: JobContext) -> None:
    _record("spin-start", "", cx.attempt)
    while True:
        pass


@job("tests.sleeper", timeout=None, tries=1)
def sleeper(seconds: float, value: str, cx: JobContext) -> None:
    """Record its start, sleep, record its end (signal and crash tests)."""
    _record("sleeper-start", value, cx.attempt)
    time.sleep(seconds)
    _record("sleeper-end", value, cx.attempt)


@job("tests.unique", unique_key=lambda user_id: f"user:{user_id}")
def unique(user_id: int) -> None:
    _record("unique", str(user_id))


@job("tests.async_record")
async def async_record(value: str, cx: JobContext) -> str:
    await asyncio.sleep(0)
    await Record.objects.acreate(kind="async", value=value, attempt=cx.attempt, pid=os.getpid())
    return value


@job("tests.mail", queue="mail")
def mail(value: str) -> None:
    _record("mail", value)


@job("tests.low", queue="low")
def low(value: str) -> None:
    _record("low", value)
