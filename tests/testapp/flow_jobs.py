"""Jobs with a concurrency limit, registered only in the workers of the limit tests
(LATERITE_TEST_FLOW=1): a registered one makes every database claim the limited one."""

from __future__ import annotations

import os
import time

from laterite_django import job

from .models import Record


def _stamp(kind: str, value: str) -> None:
    Record.objects.create(kind=kind, value=value, pid=os.getpid())


@job("tests.flow_keyed", concurrency=1, concurrency_key=lambda key, i, seconds=0.02: key)
def flow_keyed(key: str, i: int, seconds: float = 0.02) -> None:
    """At most one of a key at a time: record its start and end under `key`."""
    _stamp("flow-start", key)
    time.sleep(seconds)
    _stamp("flow-end", key)


@job("tests.flow_mixed", concurrency=1, concurrency_key=lambda queue, key, seconds=0.02: key)
def flow_mixed(queue: str, key: str | None, seconds: float = 0.02) -> None:
    """A job of `queue`, with or without a key (pushed as NewJobs carrying the key and
    its limit): record its start and end under its queue and under its key."""
    values = [f"queue:{queue}"] + ([f"key:{key}"] if key else [])
    for value in values:
        _stamp("flow-start", value)
    time.sleep(seconds)
    for value in values:
        _stamp("flow-end", value)
