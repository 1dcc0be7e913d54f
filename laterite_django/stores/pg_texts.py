"""Values as the text PostgreSQL reads, for the statements pg_hot sends through libpq
by name (`run_prepared`, `run_planned`): written here, they skip psycopg's adapters,
which cost a hot statement more than the server's parsing of the text."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["as_texts"]

# The types of the items of a list of numbers (a NULL among them).
_NUMBERS = (int, float, type(None))
# A timestamptz in PostgreSQL's binary format: the microseconds since its epoch.
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def as_texts(params: Sequence[Any], binary_times: bool = False
             ) -> list[bytes | None] | None:
    """`params` as the text PostgreSQL reads, for `run_prepared` and `run_planned`, or
    None if one is not a value written here alike (a str, None, an int, a float, a
    datetime in UTC, a list of strs, or of ints and floats with NULLs): psycopg then
    adapts them, the ordinary way.

    With `binary_times`, a datetime goes in PostgreSQL's binary format instead (8
    bytes, read for less than its text: about 2 us of the server's CPU a value), and
    the caller sends the binary format (1) for it.
    """
    texts: list[bytes | None] = []
    for value in params:
        kind = type(value)
        if kind is str:
            texts.append(value.encode())
        elif value is None:
            texts.append(None)
        elif kind is int:
            texts.append(b"%d" % value)
        elif kind is datetime and value.tzinfo is UTC:
            texts.append(((value - _EPOCH) // _MICROSECOND).to_bytes(8, "big", signed=True)
                         if binary_times else str(value).encode())
        elif kind is list and all(type(item) is int for item in value):
            texts.append(b"{%s}" % b",".join(b"%d" % item for item in value))
        elif kind is list and all(type(item) is str for item in value):
            texts.append(("{" + ",".join(_quoted(item) for item in value) + "}").encode())
        elif kind is float:
            texts.append(repr(value).encode())
        elif kind is list and all(type(item) in _NUMBERS for item in value):
            texts.append(("{" + ",".join(
                "NULL" if item is None else repr(item) for item in value) + "}").encode())
        else:
            return None
    return texts


def _quoted(text: str) -> str:
    """An element of an array literal: in double quotes, `"` and `\\` escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
