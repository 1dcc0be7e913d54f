"""A worker's own limits (`--max-jobs`, `--max-seconds`, `--max-memory`), and how much
memory this process holds now, for recycling workers."""

from __future__ import annotations

import os
import resource
import sys

__all__ = ["limit_reached", "resident_bytes"]


def resident_bytes() -> int:
    """Return this process's resident set size in bytes.

    Read from /proc on Linux (the size now); elsewhere the peak size, which
    only grows, so a worker over its limit is still replaced.
    """
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def limit_reached(
    max_jobs: int | None, max_seconds: float | None, max_memory: int | None,
    processed: int, seconds: float,
) -> str | None:
    """The limit (`--max-jobs`, `--max-seconds`, `--max-memory`) that ends a worker that
    has run `processed` jobs for `seconds`, as its stop reason; None while none has."""
    if max_jobs is not None and processed >= max_jobs:
        return "max-jobs"
    if max_seconds is not None and seconds >= max_seconds:
        return "max-seconds"
    if max_memory is not None and processed and resident_bytes() > max_memory:
        return "max-memory"
    return None
