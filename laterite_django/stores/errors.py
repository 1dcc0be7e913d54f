"""A store's backend errors, told apart: lost or refused connections become
`StoreUnavailable`, missing tables `StoreNotMigrated`, each naming the store
and where it is, so nothing outside `stores/` needs a driver to classify them.
A lock or statement timeout is a `StoreUnavailable` too (try again later) that
says the server is reachable but busy.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import connections

from ..exceptions import StoreNotMigrated, StoreUnavailable

if TYPE_CHECKING:
    from .base import Store

__all__ = ["database_outage", "describe_database", "describe_redis", "drop_connections", "guarded",
           "redis_outage"]

F = TypeVar("F", bound=Callable[..., Any])

# SQLSTATE undefined_table and undefined_column (PostgreSQL), and SQLite's wording.
_MISSING_SQLSTATES = {"42P01", "42703"}
_MISSING_SQLITE = ("no such table", "no such column", "has no column named")
# SQLSTATE lock_not_available (lock_timeout, NOWAIT) and query_canceled
# (statement_timeout, a cancel): the server answered, it was busy.
_BUSY_SQLSTATES = {
    "55P03": "timed out waiting for a lock (lock_timeout)",
    "57014": "its statement was cancelled (statement_timeout, or a cancel)",
}
_ENGINES = {"postgresql": "PostgreSQL", "mysql": "MySQL", "oracle": "Oracle"}
_DEFAULT_PORTS = {"postgresql": "5432", "mysql": "3306"}


def guarded(method: F) -> F:
    """Run a store method, raising the store's outage for a backend error that is one.

    The store's `_outage(error)` returns the StoreUnavailable to raise, or None
    for an error that is not about reaching the store (it propagates as is).
    """

    @functools.wraps(method)
    def call(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except StoreUnavailable:
            raise
        except Exception as e:
            outage = self._outage(e)
            if outage is None:
                raise
            raise outage from e

    return call  # type: ignore[return-value]


def _first_line(error: BaseException) -> str:
    for line in str(error).splitlines():
        if line.strip():
            return " ".join(line.split())
    return type(error).__name__


def _causes(error: BaseException) -> list[BaseException]:
    """The error and what it wraps (Django wraps each driver error in its own class)."""
    chain = [error]
    while (cause := chain[-1].__cause__) is not None and len(chain) < 5:
        chain.append(cause)
    return chain


def _missing_schema(chain: list[BaseException]) -> bool:
    for error in chain:
        code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if code in _MISSING_SQLSTATES:
            return True
        if any(words in str(error) for words in _MISSING_SQLITE):
            return True
    return False


def _busy(chain: list[BaseException]) -> str:
    """What kept a reachable server from answering (a lock, a timeout), or ""."""
    for error in chain:
        code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if code in _BUSY_SQLSTATES:
            return _BUSY_SQLSTATES[code]
    return ""


def _drivers() -> list[Any]:
    """The PostgreSQL drivers imported so far (one never imported raised nothing)."""
    return [sys.modules[name] for name in ("psycopg", "psycopg2") if name in sys.modules]


def _database_errors() -> tuple[type[BaseException], ...]:
    """Any error a database driver raised, wrapped by Django or not."""
    import sqlite3

    from django.db import DatabaseError

    return (DatabaseError, sqlite3.Error, *(driver.Error for driver in _drivers()))


def _connection_errors() -> tuple[type[BaseException], ...]:
    """Errors about the connection (lost, refused, timed out, locked), not the statement."""
    import sqlite3

    from django.db import InterfaceError, OperationalError

    classes: list[type[BaseException]] = [
        OperationalError, InterfaceError, sqlite3.OperationalError, sqlite3.InterfaceError,
    ]
    for driver in _drivers():
        classes += [driver.OperationalError, driver.InterfaceError]
    return tuple(classes)


def describe_database(alias: str) -> str:
    """Where a database alias points: engine and host:port or file; never a password."""
    from django.db import connections

    try:
        settings = connections[alias].settings_dict
    except Exception:
        return f"database {alias!r}"
    engine = str(settings.get("ENGINE", "")).rsplit(".", 1)[-1]
    name = settings.get("NAME") or ""
    if engine == "sqlite3":
        return f"database {alias!r} (SQLite file {name})"
    host = settings.get("HOST") or "localhost"
    port = settings.get("PORT") or _DEFAULT_PORTS.get(engine, "")
    where = f"{host}:{port}" if port else str(host)
    return f"database {alias!r} ({_ENGINES.get(engine, engine)} at {where}, name {name!r})"


def database_outage(error: BaseException, alias: str, store: str = "database") -> (
    StoreUnavailable | None
):
    """Return the exception to raise for a database `error` of `store`, or None if it
    is not about reaching the database (a missing table counts: run migrate)."""
    if isinstance(error, _database_errors()) and _missing_schema(_causes(error)):
        return StoreNotMigrated(
            f"The {store} store's tables are missing in {describe_database(alias)} "
            f"({_first_line(error)}): run `python manage.py migrate`."
        )
    if isinstance(error, _connection_errors()) and (busy := _busy(_causes(error))):
        return StoreUnavailable(
            f"The {store} store is reachable but busy: {describe_database(alias)}: {busy}: "
            f"{_first_line(error)}"
        )
    if isinstance(error, _connection_errors()):
        return StoreUnavailable(
            f"The {store} store cannot be reached: {describe_database(alias)}: {_first_line(error)}"
        )
    return None


def describe_redis(alias: str, client: Any = None) -> str:
    """Where a django-redis cache alias points: host:port and db, or its socket."""
    try:
        if client is None:
            from django_redis import get_redis_connection

            client = get_redis_connection(alias, write=True)
        kwargs = client.connection_pool.connection_kwargs
    except Exception:
        return f"cache {alias!r}"
    if kwargs.get("path"):
        return f"cache {alias!r} (Redis socket {kwargs['path']}, db {kwargs.get('db', 0)})"
    where = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return f"cache {alias!r} (Redis at {where}, db {kwargs.get('db', 0)})"


def redis_outage(error: BaseException, alias: str) -> StoreUnavailable | None:
    """Return StoreUnavailable for a lost, refused or timed-out Redis connection, else None."""
    exceptions = sys.modules.get("redis.exceptions")
    if exceptions is None or not isinstance(
        error, (exceptions.ConnectionError, exceptions.TimeoutError)
    ):
        return None
    return StoreUnavailable(
        f"The redis store cannot be reached: {describe_redis(alias)}: {_first_line(error)}"
    )


def drop_connections(store: Store) -> None:
    """Close this thread's database connections and the store's: they may be broken."""
    for conn in connections.all(initialized_only=True):
        with contextlib.suppress(Exception):
            conn.close()
    with contextlib.suppress(Exception):
        store.close()
