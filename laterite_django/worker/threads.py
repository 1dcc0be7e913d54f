"""The `worker` mode: worker threads inside this process run the stored jobs.

They use the same Worker loop as `queue_work` (thread_pool.py), started once
per process and again in a forked child. At shutdown each thread finishes
the job in hand for up to LATERITE_QUEUE_SHUTDOWN_GRACE seconds; a job still
running then goes back to its queue, not counted as an attempt. A job's
timeout (and the end of the grace) reaches a thread at its next bytecode, so
code stuck in C runs on: run `queue_work --processes N` for hard timeouts.
serving.py says when a web server's process starts and stops the threads.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import threading

from django.db import connections

from ..conf import settings
from .thread_pool import ThreadPool

__all__ = [
    "begin_shutdown", "ensure_started", "running", "running_here", "shutdown_grace", "stop_all",
]

logger = logging.getLogger("laterite")


def shutdown_grace() -> float:
    """LATERITE_QUEUE_SHUTDOWN_GRACE in seconds (conf refuses a bad value, naming it)."""
    return float(settings.SHUTDOWN_GRACE)


_pool: ThreadPool | None = None
_lock = threading.RLock()
# A process whose server is shutting down (a stop signal came) starts no threads again.
_closed_pid: int | None = None
_atexit_registered = False


def _after_fork() -> None:
    """A forked child (a pre-forking server's worker) has none of its parent's threads.

    Their Django connections are closed now, by collecting them (they hold reference
    cycles): a SQLite connection left open here until some later collection would
    share SQLite's per-process lock records with the child's own connections, and
    a commit of the child could be lost.
    """
    global _pool, _lock
    inherited = _pool is not None
    _pool = None
    _lock = threading.RLock()
    if inherited:
        gc.collect()


os.register_at_fork(after_in_child=_after_fork)


def ensure_started() -> None:
    """Start LATERITE_QUEUE_WORKERS worker threads and their watcher, once per process."""
    global _pool, _atexit_registered
    pool = _pool
    if pool is not None and pool.pid == os.getpid():
        return
    with _lock:
        if _pool is not None and _pool.pid == os.getpid():
            return
        if _closed_pid == os.getpid():
            return
        pool = ThreadPool(int(settings.WORKERS), shutdown_grace())
        pool.start()
        _pool = pool
        if not _atexit_registered:
            atexit.register(_at_exit)  # inherited by forked children, as the flag is
            _atexit_registered = True


def _at_exit() -> None:
    try:
        stop_all()
    except Exception:
        logger.exception("Could not stop the worker threads at exit")


def running_here() -> bool:
    """Say whether this process has started its threads (even if they are stopping)."""
    pool = _pool
    return pool is not None and pool.pid == os.getpid()


def running() -> list[threading.Thread]:
    """Return this process's live worker threads."""
    pool = _pool
    if pool is None or pool.pid != os.getpid():
        return []
    return [slot.thread for slot in pool.slots
            if slot.thread is not None and slot.thread.is_alive()]


def begin_shutdown(*, final: bool = False) -> None:
    """Start stopping the threads without waiting: no new claims, the grace starts.

    In a thread of its own, the jobs still running at the end of the grace are
    stopped and returned. With `final` (the process is going away), no thread
    starts again in this process.
    """
    global _closed_pid
    with _lock:
        if final:
            _closed_pid = os.getpid()
        pool = _pool
        if pool is None or pool.pid != os.getpid():
            return
        if pool.closing.is_set():
            return
        pool.begin_shutdown()
    threading.Thread(target=_finish, args=(pool,), name="laterite-shutdown", daemon=True).start()


def _finish(pool: ThreadPool) -> None:
    try:
        pool.finish_shutdown()
    finally:
        connections.close_all()  # those that returned jobs for stuck threads


def stop_all(grace: float | None = None) -> None:
    """Stop every worker thread of this process; return once all are stopped.

    Each finishes its job for up to `grace` seconds (default:
    LATERITE_QUEUE_SHUTDOWN_GRACE; a shutdown already begun keeps its own
    end), then jobs still running go back to their queues, not counted as an
    attempt.
    """
    global _pool
    with _lock:
        pool = _pool
        if pool is None or pool.pid != os.getpid():
            _pool = None
            return
        if grace is not None:
            pool.grace = grace
        pool.begin_shutdown()
    pool.finish_shutdown()
    with _lock:
        if _pool is pool:
            _pool = None
