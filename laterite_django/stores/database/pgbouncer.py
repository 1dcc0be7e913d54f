"""Whether a PostgreSQL connection reaches its server through a pooler.

A pooler that multiplexes clients onto server connections (PgBouncer, Odyssey,
PgCat, Supavisor) cannot hand a client the key of the server process it will
use, which changes from one transaction to the next: it makes one up. So the
process id the connection was given at start-up (`info.backend_pid`) and the
one the server reports (`pg_backend_pid()`) differ behind a pooler and agree on
a direct connection (a plain TCP proxy passes the real key through, and keeps
one server session per client, so it is rightly taken for direct).

Behind a transaction pooler nothing may outlive a transaction: a statement
prepared on one server connection is missing on the next (PgBouncer before 1.21
answers `prepared statement "_pg3_0" does not exist`), a LISTEN listens on a
server connection the client no longer holds, and a session advisory lock is
held by whichever client gets that server connection next. The store asks here
before it prepares, listens or locks.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["behind_pooler"]

_seen: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def behind_pooler(connection: Any) -> bool:
    """Whether the psycopg `connection` goes through a pooler (asked once per connection).

    The question is one `SELECT pg_backend_pid()`, in a transaction of its own
    when the connection is in autocommit, else in the caller's.
    """
    try:
        return _seen[connection]
    except KeyError:
        pass
    row = connection.execute("SELECT pg_backend_pid()").fetchone()
    pooled = row is None or int(row[0]) != int(connection.info.backend_pid)
    with _lock:
        _seen[connection] = pooled
    return pooled
