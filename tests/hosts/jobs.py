"""The job of the multi-host tests: it records its start and end in the `Record` table,
with the process that ran it, so a test sees which host ran what, and how often."""

from __future__ import annotations

import os
import time

from laterite_django import JobContext, job
from tests.testapp.models import Record

__all__ = ["work"]


@job("hosts.work", tries=5, backoff=0, timeout=None)
def work(value: str, seconds: float, cx: JobContext) -> None:
    """Record the start, sleep `seconds`, record the end."""
    Record.objects.create(kind="hosts-start", value=value, attempt=cx.attempt, pid=os.getpid())
    time.sleep(seconds)
    Record.objects.create(kind="hosts-end", value=value, attempt=cx.attempt, pid=os.getpid())
