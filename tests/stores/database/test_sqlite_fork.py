"""A forked child (a pre-forking server's worker process) closes the SQLite waiters of
its parent's threads (stores/database/wait.py), even one whose thread was reading at
the fork: left open, its connection shares SQLite's per-process lock records with
the child's own, and a commit of the child could be lost."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time

from laterite_django.stores.database.wait import Waiter

__all__: list[str] = []


def open_files() -> list[str]:
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed since
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
    return paths


def test_a_waiter_reading_at_the_fork_is_closed_in_the_child(tmp_path):
    name = str(tmp_path / "waited.sqlite3")
    sqlite3.connect(name).close()
    waiter = Waiter(name, uri=False)
    assert waiter.changed()
    reading = threading.Event()

    def read_slowly() -> None:  # a worker thread inside its look as the fork comes
        with waiter._busy:
            reading.set()
            time.sleep(0.3)

    thread = threading.Thread(target=read_slowly)
    thread.start()
    reading.wait(5)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if not [p for p in open_files() if p.startswith(name)] else 1)
    _, status = os.waitpid(pid, 0)
    thread.join()
    assert os.waitstatus_to_exitcode(status) == 0, "the child kept the waiter's file open"
    assert waiter.changed() is False  # the parent's waiter still works
    waiter.close()
