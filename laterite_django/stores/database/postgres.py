"""Every PostgreSQL statement of the database store, named as the store calls it, and
how they run: prepared by name on Django's own connection, their values written as
the text (or the binary times) PostgreSQL reads.

Rows travel as arrays, so each statement has one shape whatever the number of jobs,
and is prepared once per connection. A claim is one statement that also deletes the
jobs finished since the previous one; a push and make_due notify the `laterite`
channel so idle workers wake at once (wait.py holds the waiting side).

The claim's UPDATE is written once (`claim_update`) and composed into the plain
claim (CLAIM), the settle-and-claim (SETTLE_AND_CLAIM), the limited claims
(LIMITED_CLAIM, QUEUE_LIMITED_CLAIM) and the batches' counted claim (COUNTED_CLAIM).

Sections: values as text; prepared statements; waking quiet workers; push; claim,
delete and requeue; the limited claims; the counted delete and claim of batches;
the caller's transaction.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from asyncio import _get_running_loop as running_loop
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from threading import get_ident
from typing import Any, NamedTuple, TypeVar

from ...core.limits import QueueLimit
from ...core.values import Claim, NewJob
from .pgbouncer import behind_pooler
from .sql import (
    CHANNEL,
    CLAIM_LOCK,
    COLUMNS,
    IDLE_LOCK,
    INSERT_COLUMNS,
    NO_LIMIT,
    PUSH_LOCK,
    QUIET_LOCK,
    REQUEUE_SET,
    STARTS,
    TABLE,
    WAITING_OF_BATCH,
    abandoned,
    returning,
    stored_fair_key,
)

__all__ = [
    "AFTER_NOW",
    "AFTER_NOW_PUSH",
    "CLAIM",
    "CLAIM_UPDATE",
    "COUNTED_CLAIM",
    "COUNTED_DELETE",
    "COUNT_ENDS",
    "CUTOFF",
    "DELETE",
    "DELETE_FINISHED",
    "DELETE_MARKED",
    "DROP_BATCH_FIND",
    "IDS_SETTING",
    "KEYS_SETTING",
    "LIMITED_CLAIM",
    "LIMITED_DELETE",
    "LIMITED_LOCK_KEYS",
    "LIMITED_LOCK_QUEUES",
    "LOOK",
    "MAKE_DUE",
    "MUST_NOTIFY",
    "MUST_WAKE",
    "NOW",
    "PICKED",
    "PUSH_DEBOUNCED",
    "QUEUE_LIMITED_CLAIM",
    "QUEUE_LIMITED_LOCK",
    "QUEUE_LOCK_IDS",
    "REQUEUE_ABANDONED",
    "RESUME_NOTIFY",
    "SCAN",
    "SETTINGS",
    "SETTING_VALUES",
    "SETTLE_AND_CLAIM",
    "SWEEP_BATCH",
    "WAKES_QUIET",
    "Prepared",
    "as_texts",
    "claim",
    "claim_params",
    "claim_update",
    "counted_claim_params",
    "counted_delete_params",
    "delete",
    "delete_marked",
    "due_in_order",
    "execute_pipeline",
    "execute_prepared",
    "keeps_callers_settings",
    "limited_claim",
    "limited_claim_locked_keys",
    "make_due",
    "prepares",
    "push",
    "push_debounced",
    "push_one",
    "queue_limited_claim",
    "requeue_abandoned",
    "run_claim",
    "run_cursor",
    "run_delete",
    "run_planned",
    "run_planned_all",
    "run_prepared",
    "settings_kept",
    "waking",
]

Statement = tuple[str, list[Any]]


# -- Values as the text PostgreSQL reads --------------------------------------

# Values as the text PostgreSQL reads, for the statements prepared statements sends through libpq
# by name (`run_prepared`, `run_planned`): written here, they skip psycopg's adapters,
# which cost a prepared statement more than the server's parsing of the text.

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


# -- Prepared statements ------------------------------------------------------

# How the database store's prepared statements run on PostgreSQL: prepared, through one
# psycopg cursor kept per Django connection, on that connection's own transaction.
#
# A push, a claim or a deletion is one statement; what runs around it is paid at
# every one. Django's cursor wrapper would add its checks and wrapping to each,
# and a fresh psycopg cursor its set-up; so the statement goes through a plain
# psycopg cursor on the very connection Django holds (`connection.connection`),
# made once per connection and thread and kept on the Django connection object.
# It joins whatever transaction Django's connection is in: inside `atomic()` the
# statement commits or rolls back with the caller's data, as any ORM call there.
#
# A push outside any transaction (autocommit) goes further down (`run_prepared`):
# its statement, prepared once by its own name, runs through libpq with its values
# already written (as text, its times in binary: as_texts), skipping psycopg's query
# handling (about 40 us of CPU out of a push's 100). Only there: a statement that
# fails in autocommit did nothing, so
# when the server refuses it (the prepared statement was dropped: psycopg drops
# every one after a rollback; DISCARD ALL) it runs again the ordinary way, which
# raises what psycopg and Django would. Inside a transaction such an error would
# abort the caller's transaction, so a push there takes the cursor.
#
# A claim goes further still (`run_planned`): PostgreSQL plans a statement with
# values anew at each run unless a plan made without them costs no more by its
# estimates, and the claim's never does (its planning took about as long as its
# run: 0.5 ms a claim). So its statement, prepared by name, runs under settings
# sent before it in the same round trip and transaction: the plan is made once per
# connection (and again when the table's statistics change), under settings that
# keep it on the indexes. Settings of the transaction alone: nothing the caller's
# own statements run with changes.
#
# What Django would do for its own cursor is kept: no use from a running event
# loop (`SynchronousOnlyOperation`), a connection opened when there is none,
# driver errors raised as Django's own classes with the connection marked
# unusable as Django marks it (`wrap_database_errors`, paid only on an error).
# Statements run here are not in `connection.queries`, as before.

# The attribute of a Django connection that keeps its `_Session`.
_SESSION = "_laterite_prepared"
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


class _Session:
    """What one Django connection keeps to run prepared statements (one thread's)."""

    __slots__ = ("cursor", "loads", "prepared", "prepares", "raw", "thread", "utf8")

    def __init__(self, raw: Any, cursor: Any, prepares: bool) -> None:
        self.raw = raw
        self.thread = get_ident()
        self.cursor = cursor
        self.prepares = prepares
        self.utf8 = raw.info.encoding == "utf-8"
        self.prepared: set[bytes] = set()  # names prepared on `raw` (_prepare)
        self.loads: Any = None  # a psycopg Transformer reading run_planned's rows


def _current(connection: Any) -> _Session:
    session = getattr(connection, _SESSION, None)
    if (session is None or session.raw is not connection.connection
            or session.thread != get_ident()
            or running_loop() is not None):
        session = _session(connection)
    return session


def run_cursor(connection: Any, sql: str, params: Sequence[Any]) -> Any:
    """Run one statement of the claim and push path on Django's `connection`; return the psycopg
    cursor that ran it (read its result before the next statement on `connection`)."""
    session = _current(connection)
    cursor = session.cursor
    try:
        cursor.execute(sql, params, prepare=session.prepares)
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
    libpq; else as `run_cursor` does.
    """
    session = _current(connection)
    raw = session.raw
    pgconn = raw.pgconn
    if _by_name(session):
        from psycopg.generators import execute

        name = statement.name
        try:
            with raw.lock:
                if _prepare(session, statement):
                    pgconn.send_query_prepared(name, texts, formats)
                    results = raw.wait(execute(pgconn))
                    if results[-1].status == _TUPLES_OK:
                        return results[-1]
        except Exception:
            with connection.wrap_database_errors:
                raise
        # Refused by the server, so nothing was written: the ordinary way, which raises
        # the error as psycopg and Django would (or runs, if the statement was missing).
        session.prepared.discard(name)
    return run_cursor(connection, statement.sql, params).pgresult


# The diagnostic field of an error's SQLSTATE (libpq's PG_DIAG_SQLSTATE).
_SQLSTATE = ord("C")


def _by_name(session: _Session) -> bool:
    """Whether a statement may run by name through libpq on `session`'s connection: it
    prepares, speaks UTF-8 (values go as text), is in autocommit outside any
    transaction (a refused statement did nothing) and not in a psycopg pipeline."""
    pgconn = session.raw.pgconn
    return (session.prepares and session.utf8 and pgconn.transaction_status == _IDLE
            and session.raw.autocommit and pgconn.pipeline_status == _PIPELINE_OFF)


def _prepare(session: _Session, statement: Prepared) -> bool:
    """Prepare `statement` on `session`'s connection unless it is; whether it is now."""
    name = statement.name
    if name not in session.prepared:
        made = session.raw.pgconn.prepare(name, statement.numbered, statement.types)
        if made.status == _COMMAND_OK or made.error_field(_SQLSTATE) == _DUPLICATE_PREPARED:
            session.prepared.add(name)
    return name in session.prepared


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
    session = _current(connection)
    if not _by_name(session):
        return None
    named: list[tuple[bytes, list[bytes | None]]] = []
    for statement, params in statements:
        texts = as_texts(params)
        if texts is None:
            return None
        named.append((statement.name, texts))
    raw = session.raw
    try:
        with raw.lock:
            if not all(_prepare(session, statement) for statement, _ in statements):
                return None
            results = _pipelined(raw, settings, named)
    except Exception:
        with connection.wrap_database_errors:
            raise
    if any(result.status != _TUPLES_OK for result in results):
        # Refused (a statement was dropped: DEALLOCATE, DISCARD ALL): prepared anew at
        # the next run; the ordinary way raises any other error as Django would.
        for statement, _ in statements:
            session.prepared.discard(statement.name)
        return None
    if session.loads is None:
        from psycopg.adapt import Transformer

        session.loads = Transformer(session.cursor)  # the cursor's loaders (timestamptz's)
    loads = session.loads
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


def execute_prepared(
    connection: Any, sql: str, params: Sequence[Any], fetch: bool = False
) -> tuple[list, int]:
    """Run a statement of the claim and push path (see `run_cursor`); return (rows, rowcount)."""
    cursor = run_cursor(connection, sql, params)
    with connection.wrap_database_errors:
        return (cursor.fetchall() if fetch else []), cursor.rowcount


def _session(connection: Any) -> _Session:
    """Make (or make again) `connection`'s `_Session`: after a reconnection, in another
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
        session = _Session(raw, cursor, prepares(connection, raw))
    setattr(connection, _SESSION, session)
    return session


# A count of executions no statement reaches: psycopg prepares nothing by itself.
_NEVER = 2**62


def prepares(connection: Any, raw: Any) -> bool:
    """Whether the prepared statements are prepared on `raw` (Django's `connection`'s own).

    Not behind a pooler (`pgbouncer.behind_pooler`: a transaction pooler such as
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


# -- Waking quiet workers -----------------------------------------------------

# How a claim on PostgreSQL wakes the quiet workers (wait.py), so that a job
# claimed while they ask nothing, by a worker that then dies, is still swept in time.
#
# A quiet worker holds the advisory lock QUIET_LOCK, shared, on its listening
# connection. A claim that takes a job tries it, exclusive, for an instant
# (`MUST_WAKE`, once per statement and only once it updates a row): not taken, a worker
# is quiet, and the claim notifies the `laterite` channel. No wake-up is lost: such a
# claim holds CLAIM_LOCK, shared, until its commit, and a worker that took QUIET_LOCK
# is quiet only once it could take CLAIM_LOCK, exclusive, for an instant (no claim
# that looked before is still uncommitted) and its look then found no job claimed.
# This is the push's protocol (the push) with locks of its own: a claim in
# flight must not keep an idle worker from waiting, only a quiet one from going quiet.
# A claim that takes nothing takes no lock, and none notifies while no worker is quiet.

# Whether a claim must notify. A CASE, so that the locks are tried in this order, and
# the instant lock let go only if taken.
MUST_WAKE = (
    f"CASE WHEN NOT pg_try_advisory_xact_lock_shared({CLAIM_LOCK}) THEN true "
    f"WHEN pg_try_advisory_lock({QUIET_LOCK}) THEN NOT pg_advisory_unlock({QUIET_LOCK}) "
    f"ELSE true END"
)
# Appended to the `claimed_by` a claim writes: '' always, having notified if it must. An
# uncorrelated subquery, so PostgreSQL runs it once, as the first row is updated.
WAKES_QUIET = (
    f"(SELECT CASE WHEN {MUST_WAKE} THEN left(pg_notify('{CHANNEL}', '')::text, 0) "
    f"ELSE '' END)"
)
# A worker's look, on its listening connection, before it may go quiet: NULL when it
# could not take QUIET_LOCK (a claim tries it at this instant), false when it took it
# but a claim that may not have notified is uncommitted, true when it took it and no
# such claim is in flight.
LOOK = (
    f"SELECT CASE WHEN pg_try_advisory_lock_shared({QUIET_LOCK}) THEN "
    f"CASE WHEN pg_try_advisory_lock({CLAIM_LOCK}) THEN pg_advisory_unlock({CLAIM_LOCK}) "
    f"ELSE false END END"
)


# -- Push ---------------------------------------------------------------------

# The database store's PostgreSQL push: one job by name through libpq, or any number
# as arrays, each notifying the `laterite` channel when a worker waits.
#
# A push notifies only when a worker waits. A waiting worker holds the advisory lock
# IDLE_LOCK, shared; a push tries to take it, exclusive, for an instant
# (`MUST_NOTIFY`): taken, no worker waits and the push sends no NOTIFY (whose queue
# serializes the commits of the transactions that notify); not taken, it notifies.
# No wake-up is lost: a push holds PUSH_LOCK, shared, until its commit, and a worker
# that takes IDLE_LOCK then waits only once it could take PUSH_LOCK, exclusive, for an
# instant (no push that looked before it took IDLE_LOCK is still uncommitted), and
# after one more claim (wait.py). Pushes never wait for each other: the
# shared locks do not conflict, and two pushes trying IDLE_LOCK at the same instant
# both notify.
#
# Due times are the server's (the clock a claim compares them with): a job due at once
# or after a delay (NewJob.delay) is sent without its due time but with the delay,
# added to `statement_timestamp()`; only a job pushed for a moment (push_at) carries its
# own. `pushed_at` stays the pusher's, the moment its retry window (`retry_until`) is
# counted from.


# Whether a push must notify (see the module docstring). A CASE, so that the locks are
# tried in this order, and the instant lock let go only if taken.
MUST_NOTIFY = (
    f"CASE WHEN NOT pg_try_advisory_xact_lock_shared({PUSH_LOCK}) THEN true "
    f"WHEN pg_try_advisory_lock({IDLE_LOCK}) THEN NOT pg_advisory_unlock({IDLE_LOCK}) "
    f"ELSE true END"
)
# A job with a unique key is not inserted when a waiting job has that key: ON CONFLICT
# names that index (laterite_job_unique_waiting), so that any other conflict, an id
# already taken (a sequence behind its table after a restore), raises rather than
# drop the job as a duplicate. A push without keys has no ON CONFLICT at all: its rows
# cannot conflict on the key, and a speculative insertion (a probe of each unique
# index, one more WAL record) costs a lone push about 5% of its time.
_ON_KEY = (" ON CONFLICT (unique_key) WHERE token IS NULL AND unique_key IS NOT NULL "
           "DO NOTHING")


def _due(available_at: str, delay: str) -> str:
    """A job's due time from its available_at and delay (SQL; one of them is NULL): the
    moment given, or the server's now plus the delay in seconds (COALESCE reads the
    second only when the first is NULL)."""
    return f"COALESCE({available_at}, statement_timestamp() + make_interval(secs => {delay}))"


# The server's now plus a number of seconds (params: the seconds; NULL gives NULL).
AFTER_NOW_PUSH = "statement_timestamp() + make_interval(secs => %s)"

# One pushed row (params: name, queue, payload, priority, pushed_at, available_at, delay,
# retry_until, unique_key).
_ROW = f"(%s, %s, %s, %s, %s, {_due('%s', '%s')}, 0, %s, %s, '', '', 0)"


def _push_sql(on_key: str, fair: bool = False) -> str:
    """The push of any number of jobs (params: one array per column, then the channel);
    `fair`: one more array, the jobs' fair keys."""
    fk = (", fair_key", ", fk", ", %s::varchar[]", ", fk") if fair else ("", "", "", "")
    return (
        f"WITH ins AS (INSERT INTO {TABLE} ({INSERT_COLUMNS}{fk[0]}) "
        f"SELECT n, q, p, pr, pa, {_due('aa', 'd')}, 0, ru, uk, '', '', 0{fk[1]} FROM unnest("
        f"%s::varchar[], %s::varchar[], %s::text[], %s::int2[], %s::timestamptz[], "
        f"%s::timestamptz[], %s::float8[], %s::timestamptz[], %s::varchar[]{fk[2]}) "
        f"AS t(n, q, p, pr, pa, aa, d, ru, uk{fk[3]}){on_key} RETURNING id, unique_key, queue), "
        f"notified AS (SELECT pg_notify(%s, queue) FROM (SELECT DISTINCT queue FROM ins) q "
        f"WHERE (SELECT {MUST_NOTIFY})) "
        f"SELECT id, unique_key FROM ins WHERE (SELECT count(*) FROM notified) >= 0"
    )


def _push_one_sql(on_key: str) -> str:
    """The push of one job (params: one row). No CTE: the RETURNING list itself
    notifies (a row not inserted, a duplicate of a waiting job's unique key, returns
    nothing and notifies no one)."""
    return (f"INSERT INTO {TABLE} ({INSERT_COLUMNS}) VALUES {_ROW}{on_key} RETURNING id, "
            f"CASE WHEN {MUST_NOTIFY} THEN pg_notify('{CHANNEL}', queue) END")


PUSH, PUSH_KEYED = _push_sql(""), _push_sql(_ON_KEY)
PUSH_FAIR, PUSH_FAIR_KEYED = _push_sql("", fair=True), _push_sql(_ON_KEY, fair=True)
PUSH_ONE, PUSH_ONE_KEYED = _push_one_sql(""), _push_one_sql(_ON_KEY)


def push(jobs: Sequence[NewJob], ts: Any) -> list[Statement]:
    """Insert `jobs` (any number) and notify their queues; returns (id, unique_key) rows.

    PostgreSQL delivers the notification when the pushing transaction commits.
    """
    keyed = any(job.unique_key is not None for job in jobs)
    params: list[Any] = [
        [job.name for job in jobs],
        [job.queue for job in jobs],
        [job.payload for job in jobs],
        [job.priority for job in jobs],
        [job.pushed_at for job in jobs],
        [None if job.delay is not None else job.available_at for job in jobs],
        [job.delay for job in jobs],
        [job.retry_until for job in jobs],
        [job.unique_key for job in jobs],
    ]
    if any(job.fair_cost is not None for job in jobs):
        # A job of a fair queue keeps its key ("" for none) for the counts per key.
        params.append([stored_fair_key(job) for job in jobs])
        return [(PUSH_FAIR_KEYED if keyed else PUSH_FAIR, [*params, CHANNEL])]
    return [(PUSH_KEYED if keyed else PUSH, [*params, CHANNEL])]


# PUSH_ONE and PUSH_ONE_KEYED by name, their values as text, the three times in
# binary (as_texts): varchar, varchar, text, int2, two timestamptz, float8, timestamptz,
# varchar (their type OIDs), and their formats (0 text, 1 binary).
_TYPES = (1043, 1043, 25, 21, 1184, 1184, 701, 1184, 1043)
_FORMATS = (0, 0, 0, 0, 1, 1, 0, 1, 0)
_PUSH_PREPARED = Prepared(b"laterite_push_one", PUSH_ONE, _TYPES)
_PUSH_KEYED_PREPARED = Prepared(b"laterite_push_one_keyed", PUSH_ONE_KEYED, _TYPES)


def push_one(connection: Any, job: NewJob, ts: Any) -> int | None:
    """Insert one job and notify its queue; its id, or None for a duplicate of a waiting
    job's unique key."""
    delay = job.delay
    params = [job.name, job.queue, job.payload, job.priority, job.pushed_at,
              None if delay is not None else job.available_at, delay, job.retry_until,
              job.unique_key]
    texts = as_texts(params, binary_times=True)
    prepared = _PUSH_PREPARED if job.unique_key is None else _PUSH_KEYED_PREPARED
    if texts is None:
        result = run_cursor(connection, prepared.sql, params).pgresult
    else:
        result = run_prepared(connection, prepared, texts, params, _FORMATS)
    return int(result.get_value(0, 0)) if result.ntuples else None


# A debounced push (Store.push_debounced): one statement that inserts the job, or, when a
# waiting job holds its key, replaces that job's arguments (and name, queue, priority,
# retry window, concurrency key: everything the push gives) and moves its due time to
# the new one, never past its `debounce_until` (its first push plus debounce_max). The
# row is found through the partial unique index of waiting jobs, as a keyed push finds
# a duplicate, and locked by ON CONFLICT: a push racing it waits for its commit, then
# replaces in turn; a job claimed meanwhile has left the index, so the push inserts a
# new job. `xmax` is 0 in the row an INSERT made and the transaction's id in the one
# ON CONFLICT updated, which tells the two apart. Both times are the server's (its
# now plus the seconds given), as a delayed push's. A push of its own, so the plain
# and keyed pushes above stay as they are. Params: name, queue, payload, priority,
# pushed_at, debounce (seconds), retry_until, unique_key, debounce_max (seconds or
# NULL), concurrency_key, concurrency_limit.
PUSH_DEBOUNCED = (
    f"INSERT INTO {TABLE} ({INSERT_COLUMNS}, debounce_until, concurrency_key, "
    f"concurrency_limit) VALUES (%s, %s, %s, %s, %s, {AFTER_NOW_PUSH}, 0, %s, %s, '', '', 0, "
    f"{AFTER_NOW_PUSH}, %s, %s) "
    f"ON CONFLICT (unique_key) WHERE token IS NULL AND unique_key IS NOT NULL DO UPDATE SET "
    f"name = EXCLUDED.name, queue = EXCLUDED.queue, payload = EXCLUDED.payload, "
    f"priority = EXCLUDED.priority, retry_until = EXCLUDED.retry_until, "
    f"concurrency_key = EXCLUDED.concurrency_key, "
    f"concurrency_limit = EXCLUDED.concurrency_limit, "
    f"debounce_until = COALESCE({TABLE}.debounce_until, EXCLUDED.debounce_until), "
    f"available_at = LEAST(EXCLUDED.available_at, "
    f"COALESCE({TABLE}.debounce_until, EXCLUDED.available_at)) "
    f"RETURNING id, xmax::text <> '0', "
    f"CASE WHEN {MUST_NOTIFY} THEN pg_notify('{CHANNEL}', queue) END"
)


def push_debounced(job: NewJob) -> Statement:
    """The push of debounced job `job` (PUSH_DEBOUNCED); returns one (id, replaced) row."""
    return PUSH_DEBOUNCED, [
        job.name, job.queue, job.payload, job.priority, job.pushed_at, job.debounce,
        job.retry_until, job.unique_key, job.debounce_max, job.concurrency_key,
        job.concurrency_limit,
    ]


# -- Claim, delete, requeue ---------------------------------------------------


# The one clock of every lease: claims, heartbeats and the sweep's cutoff are dated by
# the server, never by a worker (hosts' clocks differ: a sweeper whose clock ran ahead
# took live claims for abandoned), as is "due" in a claim. Stable within a statement,
# so the claim's index scans still stop at the first job not yet due (clock_timestamp()
# is volatile: no index condition may use it); the time the server received the
# statement, so it is fresh even inside a caller's long transaction (now() is not).
NOW = "statement_timestamp()"
# Params: retry_after (seconds). The sweep's cutoff, by the same clock.
CUTOFF = f"{NOW} - make_interval(secs => %s)"
# Params: a delay (seconds). A job released for a retry is due that long after the
# server's now, by the same clock (never a worker's: Store.release).
AFTER_NOW = f"{NOW} + make_interval(secs => %s)"


def due_in_order(queue: str, now: str, limit: str, columns: str, lock: str = "") -> str:
    """A subquery (for a LATERAL join) of the due waiting jobs of queue `queue` (an SQL
    expression), best first: by priority, then age; at most `limit` of each priority.

    Each priority that has waiting jobs is scanned on its own (a loose index scan over
    the priorities of `laterite_job_due`: one index descent each), so the scan of the
    due jobs stops at the first job not yet due. Ordered by priority first, one scan of
    the queue's entries would step over every job delayed to later before it gives up:
    with a million jobs pushed for tomorrow, every claim read all of them.
    """
    waiting = f"FROM {TABLE} WHERE queue = {queue} AND token IS NULL"
    return (
        f"WITH RECURSIVE pr(p) AS ((SELECT priority {waiting} ORDER BY priority DESC LIMIT 1) "
        f"UNION ALL SELECT (SELECT priority {waiting} AND priority < pr.p "
        f"ORDER BY priority DESC LIMIT 1) FROM pr WHERE pr.p IS NOT NULL) "
        f"SELECT d.* FROM pr CROSS JOIN LATERAL (SELECT {columns} {waiting} "
        f"AND priority = pr.p AND available_at <= {now} "
        f"ORDER BY available_at, id LIMIT {limit}{lock}) d"
    )


# Params: queues, limit, limit. For each queue in priority order, lock its
# oldest due rows (skipping rows other workers hold); the nested loops stop as soon
# as `limit` rows are found. Each row's position in the batch is numbered over
# those few rows, in the order the worker runs them; `c` is the row's address.
_LOCKED = " FOR UPDATE SKIP LOCKED"
_PICK = (
    f"SELECT c, id, row_number() OVER (ORDER BY ord, priority DESC, available_at, id) - 1 "
    f"AS position FROM (SELECT q.ord, j.c, j.id, j.priority, j.available_at "
    f"FROM unnest(%s::varchar[]) WITH ORDINALITY AS q(name, ord) "
    f"CROSS JOIN LATERAL ("
    f"{due_in_order('q.name', NOW, '%s', 'ctid AS c, id, priority, available_at', _LOCKED)}"
    f") j ORDER BY q.ord LIMIT %s) found"
)
# The picked rows, as a CTE of a claim statement (params: _PICK's).
PICKED = f"picked AS MATERIALIZED ({_PICK})"
# Claims and deletions of finished jobs commit without waiting for the WAL flush
# (synchronous_commit off for that transaction alone). Losing one to a crash of
# the database server itself only makes the job claimable again, which is the
# at-least-once rule anyway; pushes and the failed list stay fully durable.
_ASYNC_COMMIT = "set_config('synchronous_commit', 'off', true)"
# The settings of a claim's transaction (set_config calls, in a SELECT's list): commit
# without waiting for the WAL flush (as above); plan the claim's statements once per
# connection (generic plans: planning them anew at each claim, which the server otherwise
# chooses for them, costs about as much as running them, 0.5 ms a claim); and never
# plan a scan of the whole job table: every row they read is reached through an index,
# but without the table's statistics (autovacuum off or behind, a table that was empty
# when the plan was made) the planner may take a few pages for the whole table, or
# `token IS NOT NULL` for nearly every row, and scan it all, or read every claimed row
# through a bitmap to delete 20 of them (a table vacuumed while empty, then filled, is
# costed so: a few random page reads cost more than the scan). And no JIT compilation:
# with such statistics a generic plan's cost passed jit_above_cost, and compiling it
# took 30 ms at every claim.
# Inside the caller's transaction they would last to its end: the store keeps the
# caller's values there (the caller's transaction, below).
SETTING_VALUES = {
    "synchronous_commit": "off", "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off", "enable_bitmapscan": "off", "jit": "off",
}
SETTINGS = ", ".join(f"set_config('{name}', '{value}', true)"
                     for name, value in SETTING_VALUES.items())
_SETTINGS_SQL = f"SELECT {SETTINGS}"
_SETTINGS_SELECT = _SETTINGS_SQL.encode()


def claim_update(claimed_by: str = "%s", address: str = "ctid", where: str = "") -> str:
    """The claim's UPDATE, the one every claim composes (params: token, then
    `claimed_by`'s): the rows of the CTE `picked` (`address`: the column holding each
    one's ctid, `position`: its place in the batch) become claimed by the server's
    clock, their worker written as `claimed_by` (an SQL expression), with `where`'s
    conditions added; it returns `sql.COLUMNS`.

    The picked rows are found by their address (a TID scan): they are locked, so they
    stay where they are. Joined by id instead, PostgreSQL hashes the picked rows and
    reads the whole table whenever its statistics say the table is small, as they do
    after a clear or on a fresh table; each claim then read every dead row a drain had
    left in it.
    """
    return (
        f"UPDATE {TABLE} SET token = %s, claimed_at = {NOW}, claimed_by = {claimed_by}, "
        f"attempts = attempts + 1, claim_position = picked.position "
        f"FROM picked WHERE {TABLE}.ctid = ANY(ARRAY(SELECT {address} FROM picked)) "
        f"AND {TABLE}.ctid = picked.{address}{where} {returning()}"
    )


# Params: token, worker; after PICKED. The plain claim's UPDATE: it also commits
# without waiting for the WAL flush, and wakes the quiet workers.
CLAIM_UPDATE = claim_update(f"%s || left({_ASYNC_COMMIT}, 0) || {WAKES_QUIET}", "c")
# Params: claim_params().
CLAIM = f"WITH {PICKED} {CLAIM_UPDATE}"
# Params: ids, tokens (of finished claims, pair by pair). Their rows are reached
# through the primary key whatever the table's statistics say: joined to the list
# unnested, a table without statistics (new, emptied, autovacuum off or behind) was
# read whole and hashed at every deletion, dead rows included (1 ms for 20 jobs of
# 3,000). The one-row subquery is folded into the statement, each value given once.
DELETE_FINISHED = (
    f"DELETE FROM {TABLE} USING (SELECT %s::bigint[] AS ids, %s::varchar[] AS tokens) done "
    f"WHERE {TABLE}.id = ANY(done.ids) "
    f"AND {TABLE}.token = done.tokens[array_position(done.ids, {TABLE}.id)]"
)
DELETE = f"{DELETE_FINISHED} AND {_ASYNC_COMMIT} IS NOT NULL"
# Params: checkpoint text, id, token. A cursor of cx.iterate saved as claims commit: a
# crash of the server itself may lose the last ones, whose chunks are then done again
# (Store.save_checkpoint, not durable).
SAVE_CURSOR = (f"UPDATE {TABLE} SET checkpoint = %s WHERE id = %s AND token = %s "
               f"AND {_ASYNC_COMMIT} IS NOT NULL")
# Params: ids, tokens (finished), then claim_params().
SETTLE_AND_CLAIM = f"WITH done AS ({DELETE}), {PICKED} {CLAIM_UPDATE}"
# Both by name (run_claim); their values' types are the server's to infer.
_CLAIM_PREPARED = Prepared(b"laterite_claim", CLAIM, None)
_SETTLE_AND_CLAIM_PREPARED = Prepared(b"laterite_settle_and_claim", SETTLE_AND_CLAIM, None)
_DELETE_PREPARED = Prepared(b"laterite_delete", f"{DELETE_FINISHED} RETURNING {TABLE}.id", None)
# Params: ids, tokens. The plain deletion, returning the ids deleted: finished jobs, some
# of a workflow, in the transaction that pushes their next links (delete_marked).
DELETE_MARKED = f"{DELETE} RETURNING {TABLE}.id"
# Params: a batch's payload pattern. Its waiting jobs, but those a claim holds
# (Store.drop_batch).
DROP_BATCH_FIND = f"{WAITING_OF_BATCH}{_LOCKED}"
# Params: channel, queue. A resumed queue's wake-up, as a push's (Store.resume).
RESUME_NOTIFY = "SELECT pg_notify(%s, %s)"
# Abandoned jobs requeued by one statement at most; DatabaseStore.requeue_abandoned
# runs it again while it requeues that many.
SWEEP_BATCH = 1000
# Params: reason, retry_after, retry_after. The abandoned jobs are found through
# laterite_job_claimed, the oldest beat first, SWEEP_BATCH at a time: with the LIMIT
# that index is the plan whatever the statistics say. As `WHERE token IS NOT NULL AND
# claimed_at < x` alone, a planner whose statistics came from an empty table read the
# whole table at every sweep. The rows are then found by their address; a row that
# changed in between (beat, settled, requeued by another sweep) is skipped.
REQUEUE_ABANDONED = (
    f"{REQUEUE_SET}WHERE ctid = ANY(ARRAY(SELECT ctid FROM {TABLE} WHERE {abandoned(CUTOFF)} "
    f"ORDER BY claimed_at LIMIT {SWEEP_BATCH})) AND {abandoned(CUTOFF)}"
)
# Params: ids, channel. Due at the server's now (the clock a claim compares with);
# jobs already due keep their place in line.
MAKE_DUE = (
    f"WITH due AS (UPDATE {TABLE} SET available_at = LEAST(available_at, {NOW}) "
    f"WHERE token IS NULL AND id = ANY(%s::bigint[]) RETURNING id, queue), "
    f"notified AS (SELECT pg_notify(%s, queue) FROM (SELECT DISTINCT queue FROM due) q) "
    f"SELECT id FROM due WHERE (SELECT count(*) FROM notified) >= 0"
)


def claim_params(token: str, worker: str, queues: Sequence[str], limit: int) -> list[Any]:
    """The parameters of PICKED, then CLAIM_UPDATE's, in the order they appear."""
    return [list(queues), limit, limit, token, worker]


def claim(
    finished: Sequence[Claim], token: str, now: Any, worker: str, queues: Sequence[str],
    limit: int,
) -> list[Statement]:
    """One statement: delete `finished` (claims still held), claim up to `limit` jobs.
    `now` is not read: the server's clock (NOW) dates the claim and says what is due."""
    params = claim_params(token, worker, queues, limit)
    if not finished:
        return [(CLAIM, params)]
    return [(SETTLE_AND_CLAIM, [[c.id for c in finished], [c.token for c in finished], *params])]


def run_claim(
    connection: Any, finished: Sequence[Claim], token: str, worker: str,
    queues: Sequence[str], limit: int,
) -> list[tuple] | None:
    """What `claim`'s statement returns, run under the claim's SETTINGS
    (`_under_settings`); None inside the caller's transaction: run `claim`'s there."""
    params = claim_params(token, worker, queues, limit)
    if not finished:
        return _under_settings(connection, _CLAIM_PREPARED, params)
    return _under_settings(connection, _SETTLE_AND_CLAIM_PREPARED,
                           [[c.id for c in finished], [c.token for c in finished], *params])


def run_delete(connection: Any, claims: Sequence[Claim]) -> int | None:
    """How many of `claims` were deleted (finished: their rows go), under the claim's
    SETTINGS (`_under_settings`); None inside the caller's transaction: run `delete`'s."""
    rows = _under_settings(connection, _DELETE_PREPARED, delete(claims)[1])
    return None if rows is None else len(rows)


def _under_settings(connection: Any, statement: Prepared, params: list[Any]
                    ) -> list[tuple] | None:
    """The rows of `statement`, run after the claim's SETTINGS in one transaction and
    one round trip: by name, its plan made once per connection (`run_planned`),
    or else (behind a pooler, nothing prepared) unprepared, both in one pipeline. None
    inside the caller's transaction, which the settings would outlast."""
    rows = run_planned(connection, _SETTINGS_SELECT, statement, params)
    if rows is not None:
        return rows
    connection.ensure_connection()
    if connection.in_atomic_block or not connection.connection.autocommit:
        return None
    return execute_pipeline(connection, [(_SETTINGS_SQL, []), (statement.sql, params)])[-1]


def delete(claims: Sequence[Claim]) -> Statement:
    return DELETE, [[c.id for c in claims], [c.token for c in claims]]


def delete_marked(claims: Sequence[Claim]) -> Statement:
    """Delete `claims` (held), returning the ids deleted (DatabaseStore._delete_marked)."""
    return DELETE_MARKED, [[c.id for c in claims], [c.token for c in claims]]


def make_due(ids: Sequence[int], now: Any) -> list[Statement]:
    """Make waiting or delayed `ids` due and wake the workers; returns one row per job.

    `now` is not read: the server's clock (NOW) says when, as it does for the claim."""
    return [(MAKE_DUE, [list(ids), CHANNEL])]


def requeue_abandoned(reason: str, retry_after: float) -> Statement:
    """Requeue up to SWEEP_BATCH jobs whose claims were not refreshed for `retry_after`
    seconds by the server's clock, and wake the workers of their queues."""
    return waking(REQUEUE_ABANDONED, [reason, retry_after, retry_after])


def waking(statement: str, params: list[Any]) -> Statement:
    """An UPDATE that puts jobs back in line, made to notify their queues as a push does,
    so idle workers (which wait for a notification) see them at once."""
    return (
        f"WITH back AS ({statement} RETURNING queue) "
        f"SELECT pg_notify(%s, queue) FROM back",
        [*params, CHANNEL],
    )


def execute_pipeline(connection: Any, statements: Sequence[Statement]) -> list[list]:
    """Run statements of the claim and push path (each returning rows) in one transaction, in
    order; return the rows of each.

    Outside a transaction they go in one round trip: by name through libpq where they
    can (`run_planned_all`, each prepared once per connection under a name
    made from its text), else in psycopg's pipeline mode (BEGIN, the statements and
    COMMIT sent together, one Sync). So a lock a statement takes
    is held for the server's work alone, never over a round trip. Each statement
    still has a snapshot of its own (READ COMMITTED). Inside the caller's
    transaction they run one by one in it.
    """
    import psycopg
    from django.db import transaction

    found = run_planned_all(connection, [(_named(sql), params) for sql, params in statements])
    if found is not None:
        return found
    connection.ensure_connection()
    raw = connection.connection
    if connection.in_atomic_block or not raw.autocommit:
        with transaction.atomic(using=connection.alias):
            return [execute_prepared(connection, sql, params, fetch=True)[0]
                    for sql, params in statements]
    with connection.wrap_database_errors:
        prepare = prepares(connection, raw)
        with psycopg.Cursor(raw) as control:
            cursors = [psycopg.Cursor(raw) for _ in statements]
            try:
                with raw.pipeline():
                    control.execute("BEGIN")
                    for cursor, (sql, params) in zip(cursors, statements, strict=True):
                        cursor.execute(sql, params, prepare=prepare)
                    control.execute("COMMIT")
                return [cursor.fetchall() for cursor in cursors]
            except BaseException:
                # A failed statement leaves the transaction open, aborted: end it (on a
                # broken connection there is none left to end).
                status = psycopg.pq.TransactionStatus
                if raw.info.transaction_status in (status.INTRANS, status.INERROR):
                    with contextlib.suppress(Exception):
                        raw.rollback()
                raise
            finally:
                for cursor in cursors:
                    cursor.close()


# The statements `execute_pipeline` ran by name, by their text.
_NAMED: dict[str, Prepared] = {}


def _named(sql: str) -> Prepared:
    """`sql` as a statement prepared by a name made from its text (its values' types
    inferred by the server: each placeholder's is plain from where it stands)."""
    statement = _NAMED.get(sql)
    if statement is None:
        digest = hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
        statement = _NAMED[sql] = Prepared(f"laterite_{digest}".encode(), sql, None)
    return statement


# -- Limited claim (queue limits and concurrency keys) ------------------------

# The limited claim's statements on PostgreSQL (see DatabaseStore._claim_limited for why racing
# workers never together exceed a limit with them).
#
# Four statements and the commit, sent together in one round trip
# (`execute_pipeline`), each with its own snapshot (READ COMMITTED):
#
# 1. LIMITED_DELETE: delete the finished jobs.
# 2. LIMITED_LOCK_KEYS: choose the candidates (the first waiting jobs of each queue without a
#    key or whose key has room) and lock their concurrency keys
#    (`pg_try_advisory_xact_lock`: a key another claim holds is skipped, never
#    waited for), at most one key per job claimed; the keys locked and the
#    candidates' ids are left in transaction-local settings for LIMITED_CLAIM.
# 3. LIMITED_LOCK_QUEUES: take the lock of each limited queue (waiting for it).
# 4. LIMITED_CLAIM: in a snapshot taken after every lock was granted, count (running jobs
#    per limited queue and per locked key, recent starts) and claim among the
#    candidates still waiting (a keyed one only if its key is locked); record the
#    starts, prune those past their period.
#
# A claim that locked keys but took no job (another claim took the jobs it had found
# for them, between LIMITED_LOCK_KEYS and LIMITED_CLAIM) runs once more at once
# (`DatabaseStore._claim_limited`).
#
# A lock id is `hashtextextended` of the queue or key with a prefix of its kind: two
# names sharing an id share a lock (claims wait or skip more, never less).

# The settings that hand the locked keys and the candidates' ids from LIMITED_LOCK_KEYS to
# LIMITED_CLAIM
# (transaction-local).
KEYS_SETTING = "laterite.keys"
IDS_SETTING = "laterite.ids"
# The waiting jobs a claim looks at per queue, at most (the candidates are the first of
# them without a key or whose key has room): a claim costs the same however many jobs
# of keys at their limit are first in line.
SCAN = 1000
_QUEUE_LOCK = "hashtextextended('laterite:queue:' || {name}, 0)"
_KEY_LOCK = "hashtextextended('laterite:key:' || {name}, 0)"

# LIMITED_DELETE's params: ids, tokens (finished). It sets the claim's SETTINGS (above) for
# the rest of the transaction.
LIMITED_DELETE = (f"WITH done AS ({DELETE_FINISHED} RETURNING 1) "
                  f"SELECT (SELECT count(*) FROM done), {SETTINGS}")

# Params: queues, SCAN, candidates, limit. The candidates: per queue, the first
# `candidates` waiting jobs without a key or whose key has room (by this snapshot:
# only to spare locking a full key; LIMITED_CLAIM counts again), among its first SCAN. Their
# keys are locked one by one in the order of their first job, until `limit` keys are.
LIMITED_LOCK_KEYS = (
    f"WITH running AS (SELECT concurrency_key AS key, count(*) AS n FROM {TABLE} "
    f"WHERE token IS NOT NULL AND concurrency_key IS NOT NULL GROUP BY concurrency_key), "
    f"cand AS (SELECT q.ord, j.* FROM unnest(%s::varchar[]) WITH ORDINALITY AS q(name, ord) "
    f"CROSS JOIN LATERAL (SELECT priority, available_at, id, key FROM ("
    f"SELECT priority, available_at, id, concurrency_key AS key, concurrency_limit AS lim "
    f"FROM {TABLE} WHERE queue = q.name AND token IS NULL AND available_at <= {NOW} "
    f"ORDER BY priority DESC, available_at, id LIMIT %s) s "
    f"WHERE key IS NULL OR lim > COALESCE((SELECT n FROM running WHERE running.key = s.key), 0) "
    f"ORDER BY priority DESC, available_at, id LIMIT %s) j), "
    # Materialized: the lock below is tried on its rows one by one, in their order, and
    # stops at `limit` keys (a condition on a plain subquery may be pushed down into
    # it, and then tried on every key).
    f"firsts AS MATERIALIZED (SELECT key FROM (SELECT DISTINCT ON (key) key, ord, priority, "
    f"available_at, id FROM cand WHERE key IS NOT NULL "
    f"ORDER BY key, ord, priority DESC, available_at, id) f "
    f"ORDER BY ord, priority DESC, available_at, id), "
    f"locked AS (SELECT key FROM firsts "
    f"WHERE pg_try_advisory_xact_lock({_KEY_LOCK.format(name='key')}) LIMIT %s) "
    f"SELECT set_config('{KEYS_SETTING}', "
    f"(SELECT COALESCE(array_agg(key), '{{}}') FROM locked)::text, true), "
    f"set_config('{IDS_SETTING}', (SELECT COALESCE(array_agg(id ORDER BY ord, priority DESC, "
    f"available_at, id), '{{}}') FROM cand)::text, true)"
)

# Params: limited queue names. Blocking, taken in one order (of their ids) by every
# claim, this one's and the queue-only one's (the queue-only limited claim), so two claims
# never wait for each other in a circle (the key locks of LIMITED_LOCK_KEYS never wait). Taken after
# LIMITED_LOCK_KEYS, so that while a claim holds a queue's lock the server only runs LIMITED_CLAIM
# and the
# commit.
QUEUE_LOCK_IDS = (
    f"(SELECT DISTINCT {_QUEUE_LOCK.format(name='name')} AS id "
    f"FROM unnest(%s::varchar[]) AS l(name) ORDER BY id) ids"
)
LIMITED_LOCK_QUEUES = f"SELECT count(pg_advisory_xact_lock(id)) FROM {QUEUE_LOCK_IDS}"


def _queue_room(given_back: str | None = None) -> str:
    """The first common table expressions of both limited claims: `q`, the limited queues
    in their order; `pruned`, their starts past their period deleted; `room`, how many
    jobs each may start now: its concurrency less its running jobs (plus `given_back`, a
    count of them this claim gives back), and its rate less its recent starts.

    Params: queues, concurrency, rate, period (arrays, NULL for none), NO_LIMIT,
    NO_LIMIT. Times are the server's (NOW).
    """
    plus = "" if given_back is None else f"+ {given_back} "
    return (
        f"q AS (SELECT * FROM unnest(%s::varchar[], %s::int[], %s::int[], %s::float8[]) "
        f"WITH ORDINALITY AS q(name, conc, rate, period, ord)), "
        # The starts past their period go (under the queue's lock: one claim at a time).
        f"pruned AS (DELETE FROM {STARTS} s USING q WHERE s.queue = q.name AND q.rate IS NOT NULL "
        f"AND s.started_at <= {NOW} - make_interval(secs => q.period) RETURNING 1), "
        # Materialized: each count runs once per claim, and only for a queue with that limit.
        f"room AS MATERIALIZED (SELECT q.name, q.ord, LEAST("
        f"CASE WHEN q.conc IS NULL THEN %s ELSE q.conc - (SELECT count(*) FROM {TABLE} r "
        f"WHERE r.queue = q.name AND r.token IS NOT NULL) {plus}END, "
        f"CASE WHEN q.rate IS NULL THEN %s ELSE q.rate - (SELECT count(*) FROM {STARTS} s "
        f"WHERE s.queue = q.name AND s.started_at > {NOW} "
        f"- make_interval(secs => q.period)) END) AS room "
        f"FROM q), "
    )


# The last of both limited claims, after their `claimed`: the starts of the claimed jobs
# recorded (for a queue with a rate), and the claimed rows returned.
_STARTED_AND_CLAIMED = (
    f"started AS (INSERT INTO {STARTS} (queue, started_at) SELECT c.queue, {NOW} FROM claimed c "
    f"JOIN q ON q.name = c.queue WHERE q.rate IS NOT NULL RETURNING 1) "
    f"SELECT {', '.join(COLUMNS)} FROM claimed "
    f"WHERE (SELECT count(*) FROM started) + (SELECT count(*) FROM pruned) >= 0"
)

# The claimed rows are the picked ones still waiting.
_PICKED_STILL_WAITING = f" AND {TABLE}.id = picked.id AND {TABLE}.token IS NULL"
# Params: queues, concurrency, rate, period (arrays, NULL for none), NO_LIMIT,
# NO_LIMIT, candidates, limit, token, worker. Times are the server's (NOW).
LIMITED_CLAIM = (
    f"WITH keys AS MATERIALIZED (SELECT current_setting('{KEYS_SETTING}')::varchar[] AS keys, "
    f"current_setting('{IDS_SETTING}')::bigint[] AS ids), "
    f"{_queue_room()}"
    # The running jobs of the locked keys (the partial index of claimed keyed jobs).
    f"running AS (SELECT concurrency_key AS key, count(*) AS n FROM {TABLE} "
    f"WHERE token IS NOT NULL AND concurrency_key = ANY((SELECT keys FROM keys)::varchar[]) "
    f"GROUP BY concurrency_key), "
    # The candidates of LIMITED_LOCK_KEYS still waiting, in their order, each locked as it is taken.
    # Each is found by its id alone, whatever the table's statistics say (`token IS
    # NULL` written so that the partial index of waiting jobs cannot serve it: a plan
    # made while the table was near empty scanned it all for each id). Rows another
    # claim holds are skipped: the jobs of a key or of a limited queue only its lock
    # holder takes, but a job with neither any claim may take.
    f"cand AS (SELECT room.ord, j.* FROM room CROSS JOIN LATERAL (SELECT t.* "
    f"FROM unnest((SELECT ids FROM keys)::bigint[]) AS c(id) CROSS JOIN LATERAL ("
    f"SELECT ctid, id, priority, available_at, concurrency_key, concurrency_limit "
    f"FROM {TABLE} WHERE id = c.id AND queue = room.name AND COALESCE(token, '') = '' "
    f"AND (concurrency_key IS NULL OR concurrency_key = ANY((SELECT keys FROM keys)::varchar[])) "
    f"FOR UPDATE SKIP LOCKED) t LIMIT LEAST(room.room, %s)) j WHERE room.room > 0), "
    f"ranked AS (SELECT cand.*, row_number() OVER (PARTITION BY concurrency_key "
    f"ORDER BY ord, priority DESC, available_at, id) AS nth, "
    f"COALESCE(running.n, 0) AS running FROM cand "
    f"LEFT JOIN running ON running.key = cand.concurrency_key), "
    f"picked AS (SELECT ctid, id, "
    f"row_number() OVER (ORDER BY ord, priority DESC, available_at, id) - 1 AS position "
    f"FROM ranked "
    f"WHERE concurrency_key IS NULL OR nth <= concurrency_limit - running "
    f"ORDER BY ord, priority DESC, available_at, id LIMIT %s), "
    f"claimed AS ({claim_update(f'%s || {WAKES_QUIET}', where=_PICKED_STILL_WAITING)}), "
    f"{_STARTED_AND_CLAIMED}"
)


def limited_claim(
    finished: Sequence[Claim], token: str, worker: str, queues: Sequence[str],
    limit: int, limits: dict[str, QueueLimit], candidates: int,
) -> list[tuple[str, list[Any]]]:
    """LIMITED_DELETE, LIMITED_LOCK_KEYS, LIMITED_LOCK_QUEUES and LIMITED_CLAIM with their
    parameters, to run in this order in one
    transaction."""
    plain = [limits.get(q, QueueLimit()) for q in queues]
    first = [[c.id for c in finished], [c.token for c in finished]]
    keys = [list(queues), SCAN, candidates, limit]
    claim = [
        list(queues), [lim.concurrency for lim in plain], [lim.rate for lim in plain],
        [lim.period for lim in plain], NO_LIMIT, NO_LIMIT, candidates, limit, token, worker,
    ]
    return [(LIMITED_DELETE, first), (LIMITED_LOCK_KEYS, keys),
            (LIMITED_LOCK_QUEUES, [sorted(limits)]), (LIMITED_CLAIM, claim)]


def limited_claim_locked_keys(results: Sequence[Sequence[Sequence[Any]]]) -> bool:
    """Whether LIMITED_LOCK_KEYS locked any key, from the rows of the statements."""
    return results[1][0][0] != "{}"


# -- Queue-only limited claim -------------------------------------------------

# The limited claim's statements on PostgreSQL where only queue limits apply (no job
# registered in the worker's process declares `concurrency`): the plain claim's pick,
# cut to each queue's room, under the queues' locks (see DatabaseStore._claim_limited for why racing
# workers never together exceed a limit with them).
#
# Two statements and the commit, sent together in one round trip
# (`execute_pipeline`), each with its own snapshot (READ COMMITTED):
#
# 1. QUEUE_LIMITED_LOCK: take the lock of each limited queue (waiting for it), in the order every
#    limited claim takes them (`the keyed claim`), and set the transaction's
#    settings.
# 2. QUEUE_LIMITED_CLAIM: in a snapshot taken after every lock was granted, delete the finished
# jobs;
#    count each queue's room: its concurrency less its running jobs, plus those of
#    them this statement deletes (its own snapshot still sees them running), and its
#    rate less its recent starts; claim the first waiting jobs of each queue up to its
#    room (`FOR UPDATE SKIP LOCKED`, as the plain claim picks); record the starts,
#    prune those past their period.
#
# Concurrency keys are not looked at, as by the plain claim that such a worker makes
# where no queue is limited: a worker that can run a job with `concurrency` has it
# registered, and so makes the keyed claim (`the keyed claim`), which counts them.
# Without their lookup a claim costs two statements where that one takes four, and no
# id is handed from one statement to the next.

# Params: limited queue names. The settings are the keyed claim's (see SETTINGS there),
# whose lack of bitmap scans matters here: the running jobs are counted through the
# index of claimed jobs, whose entries for deleted rows a plain index scan marks dead
# as it passes them; a bitmap scan never does, and so reads again, at every claim,
# every row claimed since the last VACUUM (with autovacuum off, 160,000 jobs later:
# 3 ms of a 3.4 ms claim).
# No hash or merge join either: the generic plan takes a claim for thousands of rows, and
# hashed the whole job table to find the few it claims.
QUEUE_LIMITED_LOCK = (
    f"SELECT count(pg_advisory_xact_lock(id)), {SETTINGS}, "
    f"set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true) "
    f"FROM {QUEUE_LOCK_IDS}"
)

# Params: limit. Each queue's due jobs, up to its room (see due_in_order).
_DUE = due_in_order("room.name", NOW, "GREATEST(LEAST(room.room, %s), 0)",
                    "ctid, id, priority, available_at", " FOR UPDATE SKIP LOCKED")

# The claimed rows are the picked ones (locked by the pick).
_PICKED_ID = f" AND {TABLE}.id = picked.id"
# Params: ids, tokens (finished); queues, concurrency, rate, period (arrays, NULL for
# none); NO_LIMIT, NO_LIMIT, limit, limit, token, worker. Times are the server's
# (NOW).
QUEUE_LIMITED_CLAIM = (
    f"WITH done AS ({DELETE_FINISHED} RETURNING {TABLE}.queue), "
    # A job deleted by `done` was claimed by this worker's previous claim, committed
    # before this snapshot: the count has it, and it is given back, no more.
    f"{_queue_room(given_back='(SELECT count(*) FROM done WHERE done.queue = q.name)')}"
    # The plain claim's pick (above), each queue's rows cut to its room.
    f"picked AS (SELECT ctid, id, "
    f"row_number() OVER (ORDER BY ord, priority DESC, available_at, id) - 1 AS position "
    f"FROM (SELECT room.ord, j.ctid, j.id, j.priority, j.available_at FROM room "
    f"CROSS JOIN LATERAL ({_DUE}) j ORDER BY room.ord LIMIT %s) found), "
    f"claimed AS ({claim_update(f'%s || {WAKES_QUIET}', where=_PICKED_ID)}), "
    f"{_STARTED_AND_CLAIMED}"
)


def queue_limited_claim(
    finished: Sequence[Claim], token: str, worker: str, queues: Sequence[str],
    limit: int, limits: dict[str, QueueLimit],
) -> list[tuple[str, list[Any]]]:
    """QUEUE_LIMITED_LOCK and QUEUE_LIMITED_CLAIM with their parameters, to run in this order in
    one transaction;
    QUEUE_LIMITED_CLAIM returns the claimed rows."""
    plain = [limits.get(q, QueueLimit()) for q in queues]
    claim = [
        [c.id for c in finished], [c.token for c in finished],
        list(queues), [lim.concurrency for lim in plain], [lim.rate for lim in plain],
        [lim.period for lim in plain], NO_LIMIT, NO_LIMIT, limit, limit, token, worker,
    ]
    return [(QUEUE_LIMITED_LOCK, [sorted(limits)]), (QUEUE_LIMITED_CLAIM, claim)]


# -- Counted delete and claim (batches) ---------------------------------------

# PostgreSQL: the finished jobs of batches deleted and counted in one statement, alone
# (COUNTED_DELETE, in a transaction that may push more) or with the next claim
# (COUNTED_CLAIM, the batch drain's claim: one round trip, as the plain drain's).
#
# The statement deletes the jobs whose claims are still held and moves their batches'
# `pending` by the jobs it deleted, in one snapshot. Counted once: a job's row is
# deleted once, and a job of the same batch and position whose end was already
# counted another way (failed for good, then retried from the failed list; its
# `BatchEnd` row stays until the batch finishes) is not counted again. The UPDATE of a
# batch's row locks it, so exactly one statement takes `pending` to 0.

# Params: ids, tokens (of the finished claims), then ids, batches, positions (of those
# of a batch). `d`: the jobs deleted; `u`: each batch counted, its row as moved.
_COUNT = (
    f"WITH d AS ({DELETE} RETURNING {TABLE}.id), "
    f"c AS (SELECT b.batch AS batch_id, count(*) AS n "
    f"FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) AS b(id, batch, pos) "
    f"JOIN d ON d.id = b.id WHERE NOT EXISTS (SELECT 1 FROM laterite_batch_end x "
    f"WHERE x.batch_id = b.batch AND x.position = b.pos) GROUP BY b.batch), "
    f"u AS (UPDATE laterite_batch SET pending = pending - c.n FROM c "
    f"WHERE laterite_batch.id = c.batch_id AND finished_at IS NULL "
    f"RETURNING laterite_batch.id, pending, failed, allow_failures, caught_at, "
    f"cancelled_at, then_call, catch_call, finally_call)"
)

# Params: _COUNT's. One row per batch counted (or one row of NULLs), each led by the
# number of jobs deleted. A batch taken to 0 gets its callbacks pushed by the caller,
# in the same transaction.
COUNTED_DELETE = (
    f"{_COUNT} SELECT (SELECT count(*) FROM d)::int, u.* FROM (SELECT 1) one "
    f"LEFT JOIN u ON true"
)

# Params: _COUNT's, then claim_params(). Rows: the claimed jobs (`sql.COLUMNS`),
# each followed by the ids of the batches the statement took to 0 (NULL for none); one
# row of NULL columns when it claimed nothing. The callbacks of those batches are
# pushed after the commit (workflows.finish_settled).
COUNTED_CLAIM = (
    f"{_COUNT}, {PICKED}, claimed AS ({CLAIM_UPDATE}) "
    f"SELECT {', '.join(f'claimed.{c}' for c in COLUMNS)}, s.settled "
    f"FROM (SELECT array_agg(id) AS settled FROM u WHERE pending <= 0) s "
    f"LEFT JOIN claimed ON true"
)


def counted_claim_params(claims: Sequence[Any], ends: Sequence[tuple[int, int, int]],
                         claim: Sequence[Any]) -> list[Any]:
    """COUNTED_CLAIM's parameters: COUNTED_DELETE's, then the claim's."""
    return [*counted_delete_params(claims, ends), *claim]


def counted_delete_params(claims: Sequence[Any], ends: Sequence[tuple[int, int, int]]
                          ) -> list[Any]:
    """COUNTED_DELETE's parameters: the claims, and (claim id, batch, position) per end."""
    return [[c.id for c in claims], [c.token for c in claims],
            [e[0] for e in ends], [e[1] for e in ends], [e[2] for e in ends]]


# Params: batches, positions, failed (one per end, sorted). The ends inserted (each
# once), counted per batch in the statement: (batch, ended, failed)
# (workflows.count_ends).
COUNT_ENDS = (
    "WITH e AS (SELECT DISTINCT ON (b, p) b, p, f FROM unnest(%s::bigint[], %s::int[], "
    "%s::bool[]) AS e(b, p, f) ORDER BY b, p, f DESC), "
    "ins AS (INSERT INTO laterite_batch_end (batch_id, position) SELECT b, p FROM e "
    "ORDER BY b, p ON CONFLICT DO NOTHING RETURNING batch_id, position) "
    "SELECT ins.batch_id, count(*), count(*) FILTER (WHERE e.f) FROM ins "
    "JOIN e ON e.b = ins.batch_id AND e.p = ins.position GROUP BY ins.batch_id "
    "ORDER BY ins.batch_id"
)


# -- The caller's transaction -------------------------------------------------

# PostgreSQL: a claim or a deletion of finished jobs inside the caller's transaction
# leaves that transaction's settings as it found them.
#
# A claim's transaction commits without waiting for the WAL flush and plans without
# scans of the whole table (`SETTINGS`), settings made with
# `set_config(..., true)`, which last to the end of the transaction. In a transaction
# of the store's own that is the claim's alone; in the caller's (`transaction.atomic()`,
# or a connection without autocommit) it would be everything the caller does before
# its commit: its rows would commit without waiting for the flush, and its queries
# would be planned without sequential scans. There the store reads the settings'
# values first and sets them back after.

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
