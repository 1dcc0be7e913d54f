"""The `worker` mode: worker threads inside this process run the stored jobs.

They use the same Worker loop as `queue_work`. A job's timeout reaches a
thread at its next bytecode, so code stuck in C is not stopped here: run
`queue_work --processes N` for hard timeouts.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading

from django.db import connections

from ..conf import settings

__all__ = ["ensure_started", "running", "stop_all"]

logger = logging.getLogger("laterite")

_threads: list[tuple[threading.Thread, object]] = []
_lock = threading.Lock()
# The process that started the threads: a forked child (a pre-forking web
# server) inherits the list but not the threads, and starts its own.
_pid: int | None = None
_atexit_registered = False


def _work(worker: object) -> None:
    try:
        worker.run()  # type: ignore[attr-defined]
    except Exception:
        logger.exception("Worker thread crashed", extra={"action": "worker_crashed"})
    finally:
        connections.close_all()


def ensure_started() -> None:
    """Start LATERITE_QUEUE_WORKERS worker threads once per process."""
    global _pid, _atexit_registered
    if _threads and _pid == os.getpid():
        return
    from .loop import Worker, default_worker_name

    with _lock:
        if _pid != os.getpid():
            _threads.clear()
        if _threads:
            return
        _pid = os.getpid()
        for index in range(int(settings.WORKERS)):
            worker = Worker(name=f"{default_worker_name()}-thread-{index}")
            thread = threading.Thread(
                target=_work, args=(worker,), name=f"laterite-worker-{index}", daemon=True
            )
            thread.start()
            _threads.append((thread, worker))
        if not _atexit_registered:
            atexit.register(stop_all)
            _atexit_registered = True


def running() -> list[threading.Thread]:
    """Return this process's live worker threads."""
    if _pid != os.getpid():
        return []
    return [thread for thread, _ in _threads if thread.is_alive()]


def stop_all(timeout: float = 10) -> None:
    """Ask every worker thread to finish its job and stop; wait up to `timeout` seconds."""
    with _lock:
        if _pid != os.getpid():
            _threads.clear()
            return
        for _, worker in _threads:
            worker.stop()  # type: ignore[attr-defined]
        for thread, _ in _threads:
            thread.join(timeout)
        _threads.clear()
