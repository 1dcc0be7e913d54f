"""One lock between the supervisor's fork() and its other threads' work in C libraries.

A forked child keeps only the thread that forked, but every lock in memory as it
was: if another thread of the supervisor (the metrics server reading the queue
gauges from the store at a scrape) was inside SQLite or libpq at that moment, a
mutex of that library stays locked in the child for good, and the child's first
connection hangs. The supervisor forks holding `lock`; a thread that works with
the store in the supervisor's process holds it too.
"""

from __future__ import annotations

import threading

__all__ = ["lock"]

lock = threading.Lock()
