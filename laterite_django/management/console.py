"""queue_work's console: its log lines on stderr when the project's logging has no place
for them, filtered by --verbosity, and the banner it starts with.

Python drops INFO records of a logger that no handler hears, so in a new
project (no LOGGING for `laterite`) a worker would start, retry and fail jobs
without a word. When neither the `laterite` logger nor an ancestor it
propagates to (the root logger) has a handler, `queue_work` adds one on
`laterite` for as long as it runs. Django's default logging puts handlers only
on the `django` loggers, so it never counts; any handler a project configured
there, a `NullHandler` included, does, and then laterite adds none and leaves
levels and formats to the project.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import sys
from collections.abc import Sequence
from typing import IO

from .. import __version__
from ..conf import settings
from ..exceptions import StoreUnavailable
from ..stores import Store
from ..stores.errors import describe_database, describe_redis

__all__ = [
    "CONSOLE_FORMAT", "ConsoleFilter", "add_console", "banner", "describe_store",
    "handled_by_project", "remove_console", "version",
]

logger = logging.getLogger("laterite")
_jobs = logging.getLogger("laterite.jobs")  # every job's start and end (worker/attempt.py)

CONSOLE_FORMAT = "%(asctime)s [%(process)d] %(levelname)s %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

# The verbosity from which an INFO line of each action shows (others: from 1).
# Every job's start and end: 3. The worker processes' starts and stops: 2.
_JOB_LINES = {"job_started", "job_succeeded", "job_returned", "job_lost"}
_PROCESS_LINES = {"worker_process_started", "worker_process_ended", "supervisor_started"}


class ConsoleFilter(logging.Filter):
    """Let a record through by its level and action, as Django's --verbosity means it.

    0: errors only. 1: also warnings (a job failed, a worker crashed) and the
    worker's own story: the banner, each retry, a stop. 2: also each worker
    process started and stopped. 3: also every job's start and end, and debug.
    """

    def __init__(self, verbosity: int, main_pid: int | None = None) -> None:
        super().__init__()
        self.verbosity = verbosity
        # Worker processes forked by a supervisor inherit this filter: their own
        # start and stop lines are process lines.
        self.main_pid = os.getpid() if main_pid is None else main_pid

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        if self.verbosity == 0:
            return False
        if record.levelno >= logging.WARNING:
            return True
        return self.verbosity >= self._needs(record)

    def _needs(self, record: logging.LogRecord) -> int:
        if record.levelno < logging.INFO:
            return 3
        action = getattr(record, "action", "")
        child = os.getpid() != self.main_pid
        if action in _JOB_LINES:
            return 3
        if action in _PROCESS_LINES:
            return 2
        if action == "worker_started":  # the banner said it
            return 3 if child else 2
        if action == "worker_stopped":
            return 2 if child else 1
        return 1


def handled_by_project(log: logging.Logger | None = None) -> bool:
    """Whether the project's logging hears `laterite`: a handler on it, or on an
    ancestor it propagates to. (Python's last-resort handler does not count.)"""
    current: logging.Logger | None = log or logger
    while current is not None:
        if current.handlers:
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def add_console(verbosity: int, stream: IO[str] | None = None) -> logging.Handler | None:
    """Log `laterite` to `stream` (stderr) at `verbosity` unless the project logs it;
    return the handler added, for `remove_console`, or None."""
    if logger.disabled or handled_by_project():
        return None
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(CONSOLE_FORMAT, DATE_FORMAT))
    handler.addFilter(ConsoleFilter(verbosity))
    handler.setLevel(logging.DEBUG)
    handler.laterite_level = logger.level  # type: ignore[attr-defined]
    handler.jobs_level = _jobs.level  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity >= 3 else logging.INFO)
    if verbosity < 3:
        # The filter would drop every job's start and end: build none of them.
        _jobs.setLevel(logging.WARNING)
    return handler


def remove_console(handler: logging.Handler | None) -> None:
    """Undo `add_console` (a command called in-process must leave logging as it was)."""
    if handler is None:
        return
    logger.removeHandler(handler)
    logger.setLevel(getattr(handler, "laterite_level", logging.NOTSET))
    _jobs.setLevel(getattr(handler, "jobs_level", logging.NOTSET))
    handler.close()


def version() -> str:
    """laterite's version: its package metadata, else the module's `__version__`."""
    try:
        return importlib.metadata.version("laterite-django")
    except importlib.metadata.PackageNotFoundError:
        return __version__


def banner(store: Store, queues: Sequence[str], processes: int) -> str:
    """One line: the version, the store and where it is, the queues (a paused one said
    so, as its workers take nothing from it), the processes. A store that cannot be read
    leaves the pauses out: the wait for it that follows says why."""
    try:
        paused = store.paused_queues()
    except StoreUnavailable:
        paused = set()
    served = ", ".join(f"{queue} (paused)" if queue in paused else queue for queue in queues)
    plural = "es" if processes != 1 else ""
    return (
        f"laterite {version()} queue_work: {settings.STORE} store, {describe_store(store)}; "
        f"queues {served}; {processes} process{plural}"
    )


def describe_store(store: Store) -> str:
    """Where the store keeps its jobs (and, for Redis, its failed list); no password."""
    where = describe_database(store.database)
    alias = getattr(store, "alias", None)
    if alias is not None:  # Redis: the jobs there, the failed list in the database
        where = f"{describe_redis(alias)}, failed list in {where}"
    return where
