"""Tasks with a concurrency limit, imported by the workers of the task limit tests only
(LATERITE_TEST_FLOW_TASKS=1; the tests import them too): a limited task makes every claim of
its process the limited one."""

from __future__ import annotations

import os
import time

from laterite_django.tasks.compat import task

from .models import Record


def _stamp(kind: str, value: str) -> None:
    Record.objects.create(kind=kind, value=value, pid=os.getpid())


@task(concurrency=1, concurrency_key=lambda key, i, seconds=0.02: key)
def keyed(key: str, i: int, seconds: float = 0.02) -> int:
    """At most one of a key at a time: record its start and end under `key`."""
    _stamp("flow-start", key)
    time.sleep(seconds)
    _stamp("flow-end", key)
    return i


@task(concurrency=2)
def two_at_a_time(i: int, seconds: float = 0.02) -> int:
    """At most two at once (no key: counted per task)."""
    _stamp("flow-start", "two")
    time.sleep(seconds)
    _stamp("flow-end", "two")
    return i
