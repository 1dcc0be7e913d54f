"""How much memory this process holds now, for recycling workers by `--max-memory`."""

from __future__ import annotations

import os
import resource
import sys

__all__ = ["resident_bytes"]


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
