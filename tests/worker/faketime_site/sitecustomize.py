"""Loaded (through PYTHONPATH) by the test workers run under libfaketime only.

libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC fails Python's time.sleep
(clock_nanosleep on the monotonic clock, to an absolute time) with EINVAL; a sleep
through select() waits the same, on the same clock.
"""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


time.sleep = _sleep
