"""The column sizes a job's name, queue and unique key must fit (models.Job and FailedJob;
a task's path: TaskResultRecord), checked where they are given, so that no store is
handed a value it cannot keep."""

from __future__ import annotations

__all__ = ["NAME_MAX", "QUEUE_MAX", "TASK_PATH_MAX", "UNIQUE_KEY_MAX", "storable", "too_long"]

NAME_MAX = 200
QUEUE_MAX = 100
UNIQUE_KEY_MAX = 255
TASK_PATH_MAX = 255


def too_long(what: str, value: str, limit: int) -> str | None:
    """Say that `what` (e.g. "queue") is longer than `limit`, naming it; or return None."""
    if len(value) <= limit:
        return None
    shown = repr(value) if len(value) <= 60 else f"{value[:50]!r}..."
    return f"{what} {shown} is {len(value)} characters long; at most {limit} fit"


def storable(text: str) -> str:
    """`text` as every store can keep it: a NUL written as `\\x00` (PostgreSQL's text
    has none), a lone surrogate as `\\udXXX` (UTF-8 has none); else `text` itself.

    For texts laterite writes from what a job raised (its error), which must be kept
    readable rather than refused.
    """
    if "\0" in text:
        text = text.replace("\0", "\\x00")
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode()
    return text
