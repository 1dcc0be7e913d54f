"""The `worker` mode: worker threads inside this process run the stored jobs."""

from __future__ import annotations

import atexit
import logging
import threading

from django.db import connections

from ..conf import settings

__all__ = ["ensure_started", "stop_all"]

logger = logging.getLogger("laterite")

_threads: list[tuple[threading.Thread, object]] = []
_lock = threading.Lock()


def _work(worker: object) -> None:
    try:
        worker.run()  # type: ignore[attr-defined]
    except Exception:
        logger.exception("Worker thread crashed", extra={"action": "worker_crashed"})
    finally:
        connections.close_all()


def ensure_started() -> None:
    """Start LATERITE_QUEUE_WORKERS worker threads once per process."""
    if _threads:
        return
    from .loop import Worker, default_worker_name

    with _lock:
        if _threads:
            return
        for index in range(int(settings.WORKERS)):
            worker = Worker(name=f"{default_worker_name()}-thread-{index}")
            thread = threading.Thread(
                target=_work, args=(worker,), name=f"laterite-worker-{index}", daemon=True
            )
            thread.start()
            _threads.append((thread, worker))
        atexit.register(stop_all)


def stop_all(timeout: float = 10) -> None:
    """Ask every worker thread to finish its job and stop; wait up to `timeout` seconds."""
    with _lock:
        for _, worker in _threads:
            worker.stop()  # type: ignore[attr-defined]
        for thread, _ in _threads:
            thread.join(timeout)
        _threads.clear()
