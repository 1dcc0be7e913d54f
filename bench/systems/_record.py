"""Record that a job started: one O_APPEND write of "id pid time" per job.

Every system's job body calls `record(i)` and nothing else, so the cost of
measuring is the same everywhere (one write syscall, a few microseconds).
The file is named by $BENCH_RECORD; the fd survives fork (RQ's Worker).
"""

import os
import time

__all__ = ["record"]

_fd = None


def record(i):
    """Append one line for job `i` to the record file."""
    global _fd
    if _fd is None:
        _fd = os.open(os.environ["BENCH_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, b"%d %d %.6f\n" % (int(i), os.getpid(), time.time()))


def noop(i):
    """The benchmark job: record the start, do nothing else."""
    record(i)
