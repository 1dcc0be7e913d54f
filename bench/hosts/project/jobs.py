"""The runs' jobs. Each writes the number it was given (and the time) to a file of its
process's own, one write per job, so even a process killed at once has said what it ran."""

from __future__ import annotations

import os
import time

from laterite_django import job

__all__ = ["noop", "slow"]

_fd: int | None = None
_pid = 0


def _record(i: int) -> None:
    global _fd, _pid
    if _fd is None or _pid != os.getpid():  # a forked worker writes its own file
        _pid = os.getpid()
        path = os.path.join(os.environ["HOSTS_RUN_DIR"], f"ran-{_pid}.txt")
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, f"{i} {time.time():.4f}\n".encode())


@job("hosts.noop", tries=5, timeout=None)
def noop(i: int) -> None:
    _record(i)


@job("hosts.slow", tries=5, timeout=None)
def slow(i: int, seconds: float) -> None:
    time.sleep(seconds)
    _record(i)
