"""Exceptions users raise from jobs, and the errors laterite raises at them."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured, SynchronousOnlyOperation

__all__ = [
    "Cancelled",
    "DuplicateJobName",
    "Fail",
    "InvalidPayload",
    "JobNotRegistered",
    "LateriteConfigurationError",
    "PushFromEventLoop",
    "PushNotReplicated",
    "Retry",
    "Snooze",
    "StoreNotMigrated",
    "StoreUnavailable",
]


class Retry(Exception):
    """Raise from a job to try again after the backoff, or after `delay` seconds."""

    def __init__(self, message: str = "", delay: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.delay = delay


class Snooze(Exception):
    """Raise from a job to run it again `seconds` from now without charging a try (an
    API answered "too many requests", a resource is busy); `@job(max_snoozes=N)`
    (default 100) fails it at the snooze after the Nth."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"{seconds!r} s")
        self.seconds = seconds


class Fail(Exception):
    """Raise from a job to move it to the failed list now, whatever tries remain."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class Cancelled(BaseException):
    """Raised in a job that was cancelled: by `cx.check()`, or by the worker after a grace.

    A BaseException, as JobTimeout is, so a job's own `except Exception` cannot
    swallow it. The job lands on the failed list as cancelled, never retried by itself.
    """


class JobNotRegistered(LookupError):
    """No job has this name (or the function was never decorated with @job)."""


class DuplicateJobName(ImproperlyConfigured):
    """Two different functions claim the same job name."""


class InvalidPayload(ValueError):
    """A job's arguments cannot be stored as JSON, or a stored payload does not decode."""


class LateriteConfigurationError(ImproperlyConfigured):
    """A LATERITE_QUEUE_* setting, or the store it names, is wrong."""


class StoreUnavailable(RuntimeError):
    """The store (database or Redis) cannot be reached right now.

    Raised by every store method for a lost, refused or timed-out connection;
    the message names the store and where it is (never a password).
    """


class PushNotReplicated(StoreUnavailable):
    """No Redis replica confirmed a push in time (LATERITE_QUEUE_REDIS_WAIT).

    The jobs are on the primary (their ids in `ids`, None for a duplicate) and
    will run unless the primary fails before a replica copies them.
    """

    def __init__(self, message: str, ids: list[int | None]) -> None:
        super().__init__(message)
        self.ids = ids


class StoreNotMigrated(StoreUnavailable):
    """The store's tables are missing: run `python manage.py migrate`."""


class PushFromEventLoop(SynchronousOnlyOperation, RuntimeError):
    """A plain push was called where an event loop runs: it would block the loop.

    Use `await job.apush(...)` (or `apush_in`, `apush_at`, `apush_many`) there.
    """
