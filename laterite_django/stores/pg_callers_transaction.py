"""PostgreSQL: a claim or a deletion of finished jobs inside the caller's transaction
leaves that transaction's settings as it found them.

A claim's transaction commits without waiting for the WAL flush and plans without
scans of the whole table (`sql_postgres.SETTINGS`), settings made with
`set_config(..., true)`, which last to the end of the transaction. In a transaction
of the store's own that is the claim's alone; in the caller's (`transaction.atomic()`,
or a connection without autocommit) it would be everything the caller does before
its commit: its rows would commit without waiting for the flush, and its queries
would be planned without sequential scans. There the store reads the settings'
values first and sets them back after.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .sql_postgres import SETTING_VALUES

__all__ = ["keeps_callers_settings", "settings_kept"]

F = TypeVar("F", bound=Callable[..., Any])

_READ = f"SELECT {', '.join(f'current_setting({name!r})' for name in SETTING_VALUES)}"
_SET_BACK = f"SELECT {', '.join(f'set_config({name!r}, %s, true)' for name in SETTING_VALUES)}"


@contextlib.contextmanager
def settings_kept(connection: Any) -> Iterator[None]:
    """Set the claim's settings back to the values they had before the block, if the
    block runs inside the caller's transaction on PostgreSQL; otherwise do nothing.

    After an error too, while the transaction can still run statements (an aborted
    one is rolled back, to its start or to a savepoint, and the settings with it)."""
    from psycopg.pq import TransactionStatus

    if connection.vendor != "postgresql" or (
            connection.get_autocommit() and not connection.in_atomic_block):
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(_READ)
        values = list(cursor.fetchone())
    try:
        yield
    finally:
        raw = connection.connection
        if raw is not None and raw.info.transaction_status == TransactionStatus.INTRANS:
            with connection.cursor() as cursor:
                cursor.execute(_SET_BACK, values)


def keeps_callers_settings(method: F) -> F:
    """Run a DatabaseStore method under `settings_kept` when it may be inside the
    caller's transaction (cheap attribute checks on the store's connection first: a
    worker's claims, outside any transaction, pay nothing more)."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        connection = self.connection
        if connection.autocommit and not connection.in_atomic_block:
            return method(self, *args, **kwargs)
        with settings_kept(connection):
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]
