"""The column sizes a job's name, queue and unique key must fit (models.Job and FailedJob;
a task's path: TaskResultRecord), checked where they are given, so that no store is
handed a value it cannot keep."""

from __future__ import annotations

__all__ = [
    "MAX_DELAY",
    "NAME_MAX",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "QUEUE_MAX",
    "TASK_PATH_MAX",
    "UNIQUE_KEY_MAX",
    "bad_characters",
    "storable",
    "too_long",
    "unfit",
]

NAME_MAX = 200
QUEUE_MAX = 100
UNIQUE_KEY_MAX = 255
TASK_PATH_MAX = 255
# A priority fits PostgreSQL's smallint (Job.priority), so every store takes the same.
PRIORITY_MIN, PRIORITY_MAX = -32768, 32767
# No job waits longer than this to run (a push_in, a Retry's delay): a mistake if longer.
MAX_DELAY = 10 * 365 * 24 * 3600.0


def too_long(what: str, value: str, limit: int) -> str | None:
    """Say that `what` (e.g. "queue") is longer than `limit`, naming it; or return None."""
    if len(value) <= limit:
        return None
    shown = repr(value) if len(value) <= 60 else f"{value[:50]!r}..."
    return f"{what} {shown} is {len(value)} characters long; at most {limit} fit"


def bad_characters(what: str, value: str) -> str | None:
    """Say that `what` holds a NUL (PostgreSQL's text has none, and libpq would cut the
    value there) or a lone surrogate (UTF-8 has none), naming it; or return None."""
    if "\0" in value:
        found = f"a NUL character at position {value.index(chr(0))}"
    elif value.isascii():
        return None
    else:
        try:
            value.encode()
            return None
        except UnicodeEncodeError as e:
            found = f"a lone surrogate {value[e.start]!r} at position {e.start}"
    shown = repr(value) if len(value) <= 60 else f"{value[:50]!r}..."
    return f"{what} {shown} holds {found}, which no store can keep"


def unfit(what: str, value: str, limit: int) -> str | None:
    """`too_long`'s problem, else `bad_characters`', else None: a name, queue or key
    given to a store must fit its column and be text every store keeps."""
    return too_long(what, value, limit) or bad_characters(what, value)


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
