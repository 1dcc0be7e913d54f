"""How the database store's hot statements run on PostgreSQL: prepared, through one
psycopg cursor kept per Django connection, on that connection's own transaction.

A push, a claim or a deletion is one statement; what runs around it is paid at
every one. Django's cursor wrapper would add its checks and wrapping to each,
and a fresh psycopg cursor its set-up; so the statement goes through a plain
psycopg cursor on the very connection Django holds (`connection.connection`),
made once per connection and thread and kept on the Django connection object.
It joins whatever transaction Django's connection is in: inside `atomic()` the
statement commits or rolls back with the caller's data, as any ORM call there.

A push outside any transaction (autocommit) goes further down (`run_prepared`):
its statement, prepared once by its own name, runs through libpq with its values
already written (as text, its times in binary: pg_texts), skipping psycopg's query
handling (about 40 us of CPU out of a push's 100). Only there: a statement that
fails in autocommit did nothing, so
when the server refuses it (the prepared statement was dropped: psycopg drops
every one after a rollback; DISCARD ALL) it runs again the ordinary way, which
raises what psycopg and Django would. Inside a transaction such an error would
abort the caller's transaction, so a push there takes the cursor.

A claim goes further still (`run_planned`): PostgreSQL plans a statement with
values anew at each run unless a plan made without them costs no more by its
estimates, and the claim's never does (its planning took about as long as its
run: 0.5 ms a claim). So its statement, prepared by name, runs under settings
sent before it in the same round trip and transaction: the plan is made once per
connection (and again when the table's statistics change), under settings that
keep it on the indexes. Settings of the transaction alone: nothing the caller's
own statements run with changes.

What Django would do for its own cursor is kept: no use from a running event
loop (`SynchronousOnlyOperation`), a connection opened when there is none,
driver errors raised as Django's own classes with the connection marked
unusable as Django marks it (`wrap_database_errors`, paid only on an error).
Statements run here are not in `connection.queries`, as before.
"""

from __future__ import annotations

import contextlib
from asyncio import _get_running_loop as running_loop
from collections.abc import Sequence
from threading import get_ident
from typing import Any, NamedTuple

from .pg_texts import as_texts
from .pooler import behind_pooler

__all__ = ["Prepared", "execute_hot", "prepares", "run_hot", "run_planned",
           "run_planned_all", "run_prepared"]

# The attribute of a Django connection that keeps its `_Hot`.
_HOT = "_laterite_hot"
# libpq's values (psycopg.pq): a transaction status, a pipeline status, result statuses.
_IDLE = 0
_PIPELINE_OFF = 0
_COMMAND_OK = 1
_TUPLES_OK = 2
_DUPLICATE_PREPARED = b"42P05"


class Prepared(NamedTuple):
    """A statement `run_prepared` runs by name; its values go as text (bytes or None)."""

    name: bytes
    sql: str  # with %s placeholders, as psycopg takes it (the ordinary way)
    types: tuple[int, ...] | None  # the type OID of each placeholder (None: inferred)

    @property
    def numbered(self) -> bytes:
        """`sql` with $1, $2, ... placeholders, as libpq prepares it."""
        parts = self.sql.split("%s")
        return "".join(
            part + (f"${i}" if i < len(parts) else "") for i, part in enumerate(parts, 1)
        ).encode()


class _Hot:
    """What one Django connection keeps to run hot statements (one thread's)."""

    __slots__ = ("cursor", "loads", "prepared", "prepares", "raw", "thread", "utf8")

    def __init__(self, raw: Any, cursor: Any, prepares: bool) -> None:
        self.raw = raw
        self.thread = get_ident()
        self.cursor = cursor
        self.prepares = prepares
        self.utf8 = raw.info.encoding == "utf-8"
        self.prepared: set[bytes] = set()  # names prepared on `raw` (_prepare)
        self.loads: Any = None  # a psycopg Transformer reading run_planned's rows


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


def run_prepared(connection: Any, statement: Prepared, texts: list[bytes | None],
                 params: Sequence[Any], formats: Sequence[int] | None = None) -> Any:
    """Run `statement` on Django's `connection`; return its result (a psycopg PGresult).

    `texts` are its values for libpq (as text, or in binary where `formats` says 1),
    `params` the same values for psycopg. Outside a transaction, by name through
    libpq; else as `run_hot` does.
    """
    hot = _current(connection)
    raw = hot.raw
    pgconn = raw.pgconn
    if _by_name(hot):
        from psycopg.generators import execute

        name = statement.name
        try:
            with raw.lock:
                if _prepare(hot, statement):
                    pgconn.send_query_prepared(name, texts, formats)
                    results = raw.wait(execute(pgconn))
                    if results[-1].status == _TUPLES_OK:
                        return results[-1]
        except Exception:
            with connection.wrap_database_errors:
                raise
        # Refused by the server, so nothing was written: the ordinary way, which raises
        # the error as psycopg and Django would (or runs, if the statement was missing).
        hot.prepared.discard(name)
    return run_hot(connection, statement.sql, params).pgresult


# The diagnostic field of an error's SQLSTATE (libpq's PG_DIAG_SQLSTATE).
_SQLSTATE = ord("C")


def _by_name(hot: _Hot) -> bool:
    """Whether a statement may run by name through libpq on `hot`'s connection: it
    prepares, speaks UTF-8 (values go as text), is in autocommit outside any
    transaction (a refused statement did nothing) and not in a psycopg pipeline."""
    pgconn = hot.raw.pgconn
    return (hot.prepares and hot.utf8 and pgconn.transaction_status == _IDLE
            and hot.raw.autocommit and pgconn.pipeline_status == _PIPELINE_OFF)


def _prepare(hot: _Hot, statement: Prepared) -> bool:
    """Prepare `statement` on `hot`'s connection unless it is; whether it is now."""
    name = statement.name
    if name not in hot.prepared:
        made = hot.raw.pgconn.prepare(name, statement.numbered, statement.types)
        if made.status == _COMMAND_OK or made.error_field(_SQLSTATE) == _DUPLICATE_PREPARED:
            hot.prepared.add(name)
    return name in hot.prepared


def run_planned(connection: Any, settings: bytes, statement: Prepared,
                params: Sequence[Any]) -> list[tuple] | None:
    """Run `statement` by name on Django's `connection` after `settings` (a SELECT of
    set_config(..., true) calls), both in one round trip and one transaction; return
    its rows, or None where it cannot run so (see `_by_name`; a value not written here
    as text; refused by the server, so nothing was written): run it the ordinary way.

    With `settings` forcing a generic plan, the statement is planned once per
    connection, under those settings, and not at each run.
    """
    found = _run_by_name(connection, settings, [(statement, params)])
    return None if found is None else found[0]


def run_planned_all(connection: Any, statements: Sequence[tuple[Prepared, Sequence[Any]]]
                    ) -> list[list[tuple]] | None:
    """Run `statements` by name on Django's `connection`, in order, in one round trip
    and one transaction; return the rows of each, or None where they cannot run so
    (as `run_planned`): run them the ordinary way. Each has a snapshot of its own (READ
    COMMITTED), and a lock one takes is held to the end, for the server's work alone."""
    return _run_by_name(connection, None, statements)


def _run_by_name(connection: Any, settings: bytes | None,
                 statements: Sequence[tuple[Prepared, Sequence[Any]]]
                 ) -> list[list[tuple]] | None:
    """`settings` (or nothing), then `statements` by name, in one pipeline: the rows
    of each statement, or None (see `run_planned`)."""
    hot = _current(connection)
    if not _by_name(hot):
        return None
    named: list[tuple[bytes, list[bytes | None]]] = []
    for statement, params in statements:
        texts = as_texts(params)
        if texts is None:
            return None
        named.append((statement.name, texts))
    raw = hot.raw
    try:
        with raw.lock:
            if not all(_prepare(hot, statement) for statement, _ in statements):
                return None
            results = _pipelined(raw, settings, named)
    except Exception:
        with connection.wrap_database_errors:
            raise
    if any(result.status != _TUPLES_OK for result in results):
        # Refused (a statement was dropped: DEALLOCATE, DISCARD ALL): prepared anew at
        # the next run; the ordinary way raises any other error as Django would.
        for statement, _ in statements:
            hot.prepared.discard(statement.name)
        return None
    if hot.loads is None:
        from psycopg.adapt import Transformer

        hot.loads = Transformer(hot.cursor)  # the cursor's loaders (timestamptz's)
    loads = hot.loads
    rows = []
    for result in results:
        loads.set_pgresult(result)
        try:
            rows.append(loads.load_rows(0, result.ntuples, tuple))
        finally:
            loads.set_pgresult(None)
    return rows


def _pipelined(raw: Any, settings: bytes | None,
               named: Sequence[tuple[bytes, list[bytes | None]]]) -> list[Any]:
    """Send `settings` (unless None), then each prepared statement by name with its
    values, and one Sync (libpq's pipeline mode: one round trip, one implicit
    transaction); the statements' results."""
    from psycopg.generators import fetch_many, send

    pgconn = raw.pgconn
    pgconn.enter_pipeline_mode()
    try:
        if settings is not None:
            pgconn.send_query_params(settings, None)
        for name, texts in named:
            pgconn.send_query_prepared(name, texts)
        pgconn.pipeline_sync()
        raw.wait(send(pgconn))
        if settings is not None:
            raw.wait(fetch_many(pgconn))  # the settings' result
        results = [raw.wait(fetch_many(pgconn))[0] for _ in named]
        raw.wait(fetch_many(pgconn))  # the Sync's
    finally:
        with contextlib.suppress(Exception):
            pgconn.exit_pipeline_mode()
        if pgconn.pipeline_status != _PIPELINE_OFF:
            # Cut off with results unread (an interrupt): the connection cannot serve
            # Django again; closed, it is opened anew at its next use.
            raw.close()
    return results


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
    from psycopg.types.datetime import TimestamptzLoader

    connection.ensure_connection()  # raises SynchronousOnlyOperation on an event loop
    raw = connection.connection
    with connection.wrap_database_errors:
        cursor = psycopg.Cursor(raw)
        # psycopg's own timestamptz loader (in C with psycopg[binary]): Django's, a
        # Python subclass, costs about 3 us per value, and a claim returns 2-3 per job.
        cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        hot = _Hot(raw, cursor, prepares(connection, raw))
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
