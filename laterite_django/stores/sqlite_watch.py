"""Woken by the kernel when a SQLite database's files are written (Linux inotify).

An idle worker on SQLite must learn of a push made by another process. Looking
at `PRAGMA data_version` every 20 ms does that, but each look wakes the process:
about 0.4% of a core per idle worker. With inotify (through `inotify_simple`,
installed with the package on Linux) the worker sleeps until the database file,
its `-wal` or its `-journal` is written, so an idle worker costs next to nothing
and still wakes within a millisecond or two of the commit.

The watch is on the file's directory, not the files: SQLite deletes and makes
again its `-wal` and `-journal` files, and a watch on a file ends with it.
Writes to other files of that directory are read and ignored. Where inotify is
missing (another system, no `inotify_simple`, the per-user instance limit
reached), `open_watch` returns None and the waiter looks every 20 ms as before.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["FileWatch", "open_watch"]


class FileWatch:
    """Tells when one of a database's files was written since the last `wait`."""

    def __init__(self, inotify: Any, names: frozenset[str]) -> None:
        self._inotify = inotify
        self._names = names

    def wait(self, seconds: float) -> bool:
        """Return True as soon as a database file is (or was, since the last call)
        written; False once `seconds` pass without that."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            events = self._inotify.read(timeout=max(0, int(left * 1000)))
            if any(event.name in self._names for event in events):
                return True
            if left <= 0:
                return False

    def close(self) -> None:
        self._inotify.close()


def open_watch(path: str) -> FileWatch | None:
    """A watch on the database file `path` (and its -wal and -journal), or None where
    inotify cannot serve (see the module docstring)."""
    try:
        from inotify_simple import INotify, flags  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None
    directory, name = os.path.split(os.path.abspath(path))
    mask = flags.MODIFY | flags.CLOSE_WRITE | flags.CREATE | flags.MOVED_TO
    try:
        inotify = INotify(nonblocking=True)
    except OSError:  # no inotify here, or too many instances (fs.inotify.max_user_instances)
        return None
    try:
        inotify.add_watch(directory, mask)
    except OSError:
        inotify.close()
        return None
    return FileWatch(inotify, frozenset({name, f"{name}-wal", f"{name}-journal"}))
