"""How the database store's hot statements run on PostgreSQL: prepared, through one
psycopg cursor kept per Django connection, on that connection's own transaction.

A push, a claim or a deletion is one statement; what runs around it is paid at
every one. Django's cursor wrapper would add its checks and wrapping to each,
and a fresh psycopg cursor its set-up; so the statement goes through a plain
psycopg cursor on the very connection Django holds (`connection.connection`),
made once per connection and thread and kept on the Django connection object.
It joins whatever transaction Django's connection is in: inside `atomic()` the
statement commits or rolls back with the caller's data, as any ORM call there.

What Django would do for its own cursor is kept: no use from a running event
loop (`SynchronousOnlyOperation`), a connection opened when there is none,
driver errors raised as Django's own classes with the connection marked
unusable as Django marks it (`wrap_database_errors`, paid only on an error).
Statements run here are not in `connection.queries`, as before.
"""

from __future__ import annotations

from asyncio import _get_running_loop as running_loop
from collections.abc import Sequence
from threading import get_ident
from typing import Any

from .pooler import behind_pooler

__all__ = ["execute_hot", "prepares", "run_hot"]

# The attribute of a Django connection that keeps its `_Hot`.
_HOT = "_laterite_hot"


class _Hot:
    """What one Django connection keeps to run hot statements (one thread's)."""

    __slots__ = ("cursor", "prepares", "raw", "thread")

    def __init__(self, raw: Any, cursor: Any, prepares: bool) -> None:
        self.raw = raw
        self.thread = get_ident()
        self.cursor = cursor
        self.prepares = prepares


def _current(connection: Any) -> _Hot:
    hot = getattr(connection, _HOT, None)
    if (hot is None or hot.raw is not connection.connection or hot.thread != get_ident()
            or running_loop() is not None):
        hot = _hot(connection)
    return hot


def run_hot(connection: Any, sql: str, params: Sequence[Any]) -> Any:
    """Run one statement of the hot path on Django's `connection`; return the psycopg
    cursor that ran it (read its result before the next statement on `connection`)."""
    hot = _current(connection)
    cursor = hot.cursor
    try:
        cursor.execute(sql, params, prepare=hot.prepares)
    except Exception:
        # As Django's cursor would: its own error classes, errors_occurred set.
        with connection.wrap_database_errors:
            raise
    return cursor


def execute_hot(
    connection: Any, sql: str, params: Sequence[Any], fetch: bool = False
) -> tuple[list, int]:
    """Run a statement of the hot path (see `run_hot`); return (rows, rowcount)."""
    cursor = run_hot(connection, sql, params)
    with connection.wrap_database_errors:
        return (cursor.fetchall() if fetch else []), cursor.rowcount


def _hot(connection: Any) -> _Hot:
    """Make (or make again) `connection`'s `_Hot`: after a reconnection, in another
    thread (a connection Django lets threads share), or to refuse an event loop."""
    import psycopg

    connection.ensure_connection()  # raises SynchronousOnlyOperation on an event loop
    raw = connection.connection
    with connection.wrap_database_errors:
        hot = _Hot(raw, psycopg.Cursor(raw), prepares(connection, raw))
    setattr(connection, _HOT, hot)
    return hot


# A count of executions no statement reaches: psycopg prepares nothing by itself.
_NEVER = 2**62


def prepares(connection: Any, raw: Any) -> bool:
    """Whether the hot statements are prepared on `raw` (Django's `connection`'s own).

    Not behind a pooler (`pooler.behind_pooler`: a transaction pooler such as
    PgBouncer hands each transaction any server connection, where the statement
    was never prepared), nor when the database's OPTIONS say
    `"prepare_threshold": None`. Django turns psycopg's preparing off by default
    (a threshold of None, for the poolers' sake), and psycopg then ignores
    `prepare=True`: a threshold no count reaches keeps the automatic preparing of
    every other statement off while ours are prepared on request.
    """
    options = connection.settings_dict.get("OPTIONS", {})
    if "prepare_threshold" in options and options["prepare_threshold"] is None:
        return False
    if behind_pooler(raw):
        return False
    if raw.prepare_threshold is None:
        raw.prepare_threshold = _NEVER
    return True
