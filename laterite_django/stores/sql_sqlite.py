"""The database store's SQLite statements (also used for any database but PostgreSQL),
and how an idle worker on SQLite learns that a job may be due.

SQLite takes its write lock for each statement, so claims are serialized and
need no row locks. Values travel one bound parameter each, so big pushes are
cut into chunks under SQLite's bound-parameter limit (32,766).

SQLite has no LISTEN/NOTIFY; the waiting worker's wake-up is in `Waiter`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .base import Claim, NewJob
from .sql import COLUMNS, INSERT_COLUMNS, REQUEUE_SET, ROW, TABLE, abandoned, execute
from .sqlite_watch import open_watch

__all__ = [
    "NOW", "SWEEP_BATCH", "Waiter", "claim", "delete", "execute_hot", "make_due", "open_waiter",
    "push", "push_one", "requeue_abandoned", "wait", "waking",
]

Statement = tuple[str, list[Any]]

# Jobs per INSERT (8 parameters each) and ids per UPDATE.
_CHUNK = 2000


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[start : start + _CHUNK] for start in range(0, len(items), _CHUNK)]


def waking(statement: str, params: list[Any]) -> Statement:
    """The statement as it is: nothing waits to be woken on SQLite."""
    return statement, params


# The clock of the leases (claims, heartbeats, the sweep's cutoff): SQLite's, written
# as Django writes a datetime (UTC, "YYYY-MM-DD HH:MM:SS.SSS": to the millisecond), so
# the sweep compares them with the clock that dated them. SQLite is one file on one
# host, so it is that host's clock, which its workers share. (A claim's "due" is the
# worker's now, to the microsecond, as a push dates its jobs: the same host's clock.)
NOW = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')"
# No limit: SQLite takes laterite_job_claimed for the abandoned jobs by itself.
SWEEP_BATCH = None
# Params: "-<retry_after> seconds" (a modifier of SQLite's date functions). The
# sweep's cutoff, by the same clock.
CUTOFF = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s)"
# Params: reason, then CUTOFF's.
REQUEUE_ABANDONED = f"{REQUEUE_SET}WHERE {abandoned(CUTOFF)}"


def requeue_abandoned(reason: str, retry_after: float) -> Statement:
    """Requeue the jobs whose claims were not refreshed for `retry_after` seconds."""
    return REQUEUE_ABANDONED, [reason, f"{-retry_after:+f} seconds"]


def push(jobs: Sequence[NewJob], ts: Callable[[Any], Any]) -> list[Statement]:
    """Insert `jobs`, one statement per chunk; each returns (id, unique_key) rows."""
    statements = []
    for chunk in _chunks(jobs):
        params: list[Any] = []
        for job in chunk:
            params += [
                job.name, job.queue, job.payload, job.priority, ts(job.pushed_at),
                ts(job.available_at), ts(job.retry_until), job.unique_key,
            ]
        statements.append((
            f"INSERT INTO {TABLE} ({INSERT_COLUMNS}) VALUES {', '.join([ROW] * len(chunk))} "
            f"ON CONFLICT DO NOTHING RETURNING id, unique_key",
            params,
        ))
    return statements


def push_one(connection: Any, job: NewJob, ts: Callable[[Any], Any]) -> int | None:
    """Insert one job; its id, or None for a duplicate of a waiting job's unique key."""
    rows, _ = execute(connection, _PUSH_ONE, [
        job.name, job.queue, job.payload, job.priority, ts(job.pushed_at),
        ts(job.available_at), ts(job.retry_until), job.unique_key,
    ], fetch=True)
    return rows[0][0] if rows else None


_PUSH_ONE = (
    f"INSERT INTO {TABLE} ({INSERT_COLUMNS}) VALUES {ROW} ON CONFLICT DO NOTHING RETURNING id"
)


def claim(
    finished: Sequence[Claim], token: str, now: Any, worker: str, queues: Sequence[str],
    limit: int,
) -> list[Statement]:
    """Delete `finished` (claims still held), then claim up to `limit` jobs: the first
    listed queue first, then by priority and age, each numbered by its place in the batch.

    Each queue's first `limit` due jobs are read in the order of the due index
    (laterite_job_due), then merged: a claim reads about `limit` rows per queue
    however many wait. (Ranking the queues with a CASE in one ORDER BY would sort
    every due job of those queues at each claim.)
    """
    per_queue = " UNION ALL ".join(
        f"SELECT * FROM (SELECT id, priority, available_at, {rank} AS rank FROM {TABLE} "
        f"WHERE queue = %s AND token IS NULL AND available_at <= %s "
        f"ORDER BY priority DESC, available_at, id LIMIT %s)"
        for rank in range(len(queues))
    )
    sql = (
        f"UPDATE {TABLE} SET token = %s, claimed_at = {NOW}, claimed_by = %s, "
        f"attempts = attempts + 1, claim_position = picked.position FROM ("
        f"SELECT id, row_number() OVER (ORDER BY rank, priority DESC, available_at, id) - 1 "
        f"AS position FROM (SELECT id, priority, available_at, rank FROM ({per_queue}) "
        f"ORDER BY rank, priority DESC, available_at, id LIMIT %s)) AS picked "
        f"WHERE {TABLE}.id = picked.id RETURNING {', '.join(COLUMNS)}"
    )
    params = [token, worker, *[v for queue in queues for v in (queue, now, limit)], limit]
    return [*([delete(finished)] if finished else []), (sql, params)]


def delete(claims: Sequence[Claim]) -> Statement:
    pairs = " OR ".join(["(id = %s AND token = %s)"] * len(claims))
    return (
        f"DELETE FROM {TABLE} WHERE {pairs}",
        [value for c in claims for value in (c.id, c.token)],
    )


def make_due(ids: Sequence[int], now: Any) -> list[Statement]:
    """Make waiting or delayed `ids` due (jobs already due keep their place in line);
    each statement returns one row per job. Waiting workers see the commit (`Waiter`)."""
    return [
        (
            f"UPDATE {TABLE} SET available_at = MIN(available_at, %s) "
            f"WHERE token IS NULL AND id IN ({', '.join(['%s'] * len(chunk))}) RETURNING id",
            [now, *chunk],
        )
        for chunk in _chunks(ids)
    ]


# The hot path runs as any statement does (sqlite3 keeps a cache of prepared statements).
execute_hot = execute


# -- waking an idle worker ---------------------------------------------------------

# Seconds between two looks at the database's data_version while a worker waits:
# a push starts about half of this later on average, plus the claim. Each look
# costs a thread wake-up and one PRAGMA (two fcntl calls on the WAL index in WAL
# mode), some 60-130 us of CPU on a shared 2-core VM: every 20 ms an idle
# `queue_work` used 0.6-0.7% of a core there (0.05% when it slept out
# LATERITE_QUEUE_POLL); every 10 ms it used 1.2%. Where the kernel can tell of
# writes to the file (sqlite_watch), the waiter sleeps until one instead, and this
# is only the shortest time between two looks, should the file be written nonstop.
WAKE_CHECK_EVERY = 0.02
# With a watch, the longest sleep between two looks: a write the watch missed, and
# a stop, are seen within this.
WATCHED_LOOK_EVERY = 1.0


class Waiter:
    """Tells a waiting worker that another connection committed to the database file.

    SQLite cannot notify a connection, but `PRAGMA data_version` changes on a
    connection whenever *another* connection (of this process or another one) has
    committed a change to the file since the previous read; a write that changes no
    row (an empty claim, a sweep that finds nothing) leaves it alone. Reading it
    takes and drops a read lock: two fcntl calls on the WAL index in WAL mode, where
    it never blocks a writer (in rollback-journal mode a writer that commits at that
    very moment retries after a millisecond, under its busy timeout). The waiter
    holds a connection of its own, kept across waits, so a commit that lands
    between two waits (after the worker's claim found nothing, before it waits
    again) still changes the version it saw last. The connection belongs to the
    thread and process that opened it (the store keeps one per thread).
    """

    def __init__(self, database: str, *, uri: bool) -> None:
        self.database = database
        self.pid = os.getpid()
        # Made before the first look, so no write after that look goes unseen.
        self._watch = None if uri else open_watch(database)
        # timeout=0: a look that finds the file locked says "no change" and the
        # next one, a tick later, tries again; it never waits on a writer.
        # Any thread may close it: a forked child closes those it inherited.
        self._connection = sqlite3.connect(database, uri=uri, timeout=0, isolation_level=None,
                                           check_same_thread=False)
        self._busy = threading.Lock()  # held while the connection is in use
        _waiters.add(self)
        self._version: int | None = None
        self._quiet_until = 0.0
        self.looks = 0  # how often data_version was read (for tests)

    @property
    def watched(self) -> bool:
        """Whether the kernel tells of writes to the file (else: a look every 20 ms)."""
        return self._watch is not None

    def changed(self) -> bool:
        """True if another connection committed since the previous call (and on the first)."""
        self.looks += 1
        try:
            with self._busy:
                version = self._connection.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.OperationalError:
            return False  # busy (a writer holds the file in rollback-journal mode)
        changed = version != self._version
        self._version = version
        return changed

    def pause(self, seconds: float) -> None:
        """Sleep until the next look is due: WAKE_CHECK_EVERY, or with a watch until
        the file is written (never sooner than WAKE_CHECK_EVERY after the previous
        write woke it) or WATCHED_LOOK_EVERY passes; at most `seconds`."""
        if self._watch is None:
            time.sleep(min(WAKE_CHECK_EVERY, seconds))
            return
        now = time.monotonic()
        if now < self._quiet_until:
            time.sleep(min(self._quiet_until - now, seconds))
            return
        if self._watch.wait(min(WATCHED_LOOK_EVERY, seconds)):
            self._quiet_until = time.monotonic() + WAKE_CHECK_EVERY

    def close(self) -> None:
        with self._busy:
            self._release()

    def _release(self) -> None:
        """Close the connection and the watch (the caller holds `_busy`)."""
        try:
            self._connection.close()
        finally:
            if self._watch is not None:
                self._watch.close()


# The waiters of this process, so that a forked child can close those it inherited.
_waiters: weakref.WeakSet[Waiter] = weakref.WeakSet()


# The waiters whose `_busy` the forking thread holds across a fork.
_held_at_fork: list[Waiter] = []


def _hold_waiters() -> None:
    """Before a fork: wait for this process's waiters to finish their look (a
    `PRAGMA data_version`, never waiting on a lock) and hold them idle, so that the
    child inherits none in the middle of a read."""
    for waiter in list(_waiters):
        if waiter.pid == os.getpid():
            waiter._busy.acquire()
            _held_at_fork.append(waiter)


def _let_go_of_waiters() -> None:
    """After the fork: the parent's waiters go on; the child's may be closed."""
    while _held_at_fork:
        _held_at_fork.pop()._busy.release()


def _close_inherited_waiters() -> None:
    """In a forked child, close the waiters of the parent's threads, now.

    Their threads do not exist here, but their connections (leaked by the threads'
    frames) stay open, and SQLite keeps one record of locks per file and process:
    the child's own connections would count on locks held by these, which the child
    does not hold, and a commit of the child could be lost. None was reading at the
    fork (`_hold_waiters`); one that was anyway (a fork made past the handlers) is
    left alone: its connection's mutex may be held for good.
    """
    _let_go_of_waiters()  # held idle across the fork: free to close now
    for waiter in list(_waiters):
        if waiter.pid == os.getpid() or not waiter._busy.acquire(blocking=False):
            continue
        with contextlib.suppress(Exception):
            waiter._release()
        _waiters.discard(waiter)


os.register_at_fork(before=_hold_waiters, after_in_parent=_let_go_of_waiters,
                    after_in_child=_close_inherited_waiters)


def open_waiter(connection: Any) -> Waiter | None:
    """A Waiter on the file behind Django `connection`; None for a database that is
    not SQLite, an in-memory one or a file that does not exist (the worker then
    polls every LATERITE_QUEUE_POLL)."""
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return None
    name = str(connection.settings_dict["NAME"])
    if name.startswith("file:"):
        return Waiter(name, uri=True)
    if not os.path.exists(name):
        return None  # never create the file: the worker's own queries report it
    return Waiter(name, uri=False)


def wait(
    waiter: Waiter, timeout: float, stop: threading.Event,
    seconds_to_due: Callable[[], float | None],
) -> None:
    """Return when a job may be due, `timeout` passes or `stop` is set.

    At each look the waiter reads data_version; when another
    connection committed, one read (`seconds_to_due`: seconds until the next
    unclaimed job of the worker's queues is due, None if there is none) tells
    whether that commit made work: a job due now ends the wait, a job due later
    shortens it to that moment, and any other commit (a delayed push, another
    table of the project) lets the worker sleep on without taking the write lock
    for an empty claim. The first look of a waiter always reads, so a job pushed
    before the waiter existed is not missed. If that read fails, the wait ends and
    the worker's claim meets the error.

    Between looks it sleeps (`Waiter.pause`: until the file is written, where
    the kernel tells, else WAKE_CHECK_EVERY) rather than waiting on `stop` (an
    Event wait costs a lock and a condition each time); `stop` is seen at the
    next look.
    """
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        if waiter.changed():
            try:
                seconds = seconds_to_due()
            except Exception:
                return
            if seconds is not None:
                if seconds <= 0:
                    return
                deadline = min(deadline, time.monotonic() + seconds)
        left = deadline - time.monotonic()
        if left <= 0:
            return
        waiter.pause(left)
