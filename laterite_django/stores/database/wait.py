"""How an idle worker waits on the database store: on PostgreSQL for a NOTIFY on a
listening connection of its thread's own, on SQLite for another connection's
commit (`Waiter`), never past the next delayed job's time.

A LISTEN through a transaction pooler (PgBouncer in `pool_mode = transaction`)
listens on a server connection the listener gives back at once: no notification
ever reaches it. The listening connection is opened on LATERITE_QUEUE_LISTEN_DATABASE
when set (an alias that reaches PostgreSQL directly), else on the store's own
database; a listener found behind a pooler (`pgbouncer.behind_pooler`) is closed and
the worker polls every LATERITE_QUEUE_POLL seconds instead, saying so once.

While it waits for a notification, a worker holds the advisory lock IDLE_LOCK,
shared, on its listening connection: pushes notify only while some worker holds
it (see postgres.py). It takes the lock, checks that no push that may not have
notified is uncommitted, claims once more before it waits (so such a push is
seen), and lets go of the lock when woken. Once it has looked and found nothing
claimed and nothing due (`_quiet_for`), it is quiet: until a notification or its
next delayed job, it asks the database nothing at all. While quiet it holds
QUIET_LOCK, shared, so that the next claim of a job anywhere wakes it (postgres.py).

On SQLite a worker's `Waiter` reads the file's data_version, woken by the kernel
when the file is written where it can tell (`FileWatch`):

Woken by the kernel when a SQLite database's files are written (Linux inotify).

An idle worker on SQLite must learn of a push made by another process. Looking
at `PRAGMA data_version` every 20 ms does that, but each look wakes the process:
about 0.4% of a core per idle worker. With inotify (through `inotify_simple`,
installed with the package on Linux) the worker sleeps until the database file,
its `-wal` or its `-journal` is written, so an idle worker costs next to nothing
and still wakes within a millisecond or two of the commit.

The watch is on the file's directory, not the files: SQLite deletes and makes
again its `-wal` and `-journal` files, and a watch on a file ends with it.
Writes to other files of that directory are read and ignored. Where inotify is
missing (another system, no `inotify_simple`, the per-user instance limit
reached), `open_watch` returns None and the waiter looks every 20 ms as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import connections
from django.utils import timezone

from ...conf import settings
from ..base import QUIET_LONGEST
from .pgbouncer import behind_pooler
from .postgres import LOOK
from .sql import BUSY, CHANNEL, IDLE_LOCK, PUSH_LOCK, QUIET_LOCK, aware, execute

__all__ = ["LISTEN_HINT", "FileWatch", "Waiter", "Waiting", "open_waiter", "open_watch",
           "wait_for_commit"]

logger = logging.getLogger("laterite")

# A worker that finds a push uncommitted (PUSH_LOCK held) as it goes idle looks again
# after this long, then twice as long each time, up to its poll interval.
IDLE_LOCK_RETRY = 0.005

# The shared advisory locks a worker's listening session may hold, each with the flag
# of the thread's state that says it does: IDLE_LOCK while it waits (`_go_idle`),
# QUIET_LOCK while it is quiet (`_hold_quiet_lock`).
_HELD = ((IDLE_LOCK, "idle_held"), (QUIET_LOCK, "quiet_held"))

LISTEN_HINT = (
    "Set LATERITE_QUEUE_LISTEN_DATABASE to a database alias that reaches the same "
    "PostgreSQL directly (not through the pooler), so pushes wake idle workers at once."
)


class Waiting:
    """How the idle workers of one DatabaseStore wait: each thread's listening
    connection (PostgreSQL) or file waiter (SQLite), and the advisory locks it holds."""

    def __init__(self, database: str,
                 next_due: Callable[[Sequence[str]], datetime | None]) -> None:
        self.database = database
        self._next_due = next_due
        # Each thread that waits LISTENs on a psycopg connection of its own.
        self.local = threading.local()
        # Set once a listening connection was found behind a pooler: poll from then on.
        self._listen_refused = False

    @property
    def connection(self) -> Any:
        return connections[self.database]

    def close(self) -> None:
        """Close this thread's listening connection and file waiter."""
        self._close_listener()
        self._close_waiter()

    def wait(
        self, queues: Sequence[str], timeout: float, stop: threading.Event, *,
        longest: float | None = None,
    ) -> None:
        """Sleep until a push to one of `queues` is notified (PostgreSQL) or a commit
        makes one of their jobs due (SQLite).

        Pushes, releases, requeues and make_due notify (or commit, which a SQLite
        waiter sees), so with `longest` the wait lasts until then or the next
        delayed job's time: an idle PostgreSQL worker asks the database nothing.
        Right after the listener (re)connects, a push may have gone unheard: that
        wait returns at once, for one more claim. A listener or waiter that cannot
        connect never raises:
        the worker polls every `timeout` until it can.
        """
        if self.connection.vendor != "postgresql":
            self._wait_sqlite(queues, timeout, stop, longest)
            return
        try:
            found = self._listen()
            if found is None:
                # No connection that can LISTEN: poll.
                stop.wait(timeout)
                return
            listener, new = found
            if new:
                # A push before LISTEN went unheard: the claim that follows sees it,
                # and every later one is heard.
                return
            if not getattr(self.local, "idle", False):
                self._go_idle(listener, timeout, stop)
                return  # one more claim, now that pushes notify
            if longest is not None:
                timeout = self._quiet_for(listener, queues, timeout, longest)
            deadline = time.monotonic() + timeout
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    # Still idle, most likely: IDLE_LOCK is kept for the next wait. A
                    # quiet spell that ended lets go of QUIET_LOCK: the worker claims
                    # next, and its work must not make every claim notify.
                    if not self.quiet():
                        self._release_quiet_lock(listener)
                    return
                # In slices, so a stop request is seen within a second.
                ready, _, _ = select.select([listener.fileno()], [], [], min(left, 1.0))
                if ready:
                    # Drain what arrived; any notification is a reason to look again.
                    for _ in listener.notifies(timeout=0, stop_after=1000):
                        pass
                    self._leave_idle(listener)
                    return
        except Exception:
            # A broken listener must not stop the worker: poll until it comes back.
            self._close_listener()
            stop.wait(timeout)

    def _go_idle(self, listener: Any, timeout: float, stop: threading.Event) -> None:
        """Take IDLE_LOCK, shared, so that pushes from now on notify; then make sure no
        push that looked before is still uncommitted (PUSH_LOCK free for an instant).
        If one is, wait a little, longer each time, and let the worker claim again
        (that push, once committed, is seen by a claim; later ones notify)."""
        if not getattr(self.local, "idle_held", False):
            # Tried, never waited for: a push holds it exclusive only for an instant,
            # and a worker must not hang on a session that kept it (a push cancelled
            # between its try and its unlock); such a worker looks every poll instead.
            self.local.idle_held = listener.execute(
                "SELECT pg_try_advisory_lock_shared(%s)", [IDLE_LOCK]).fetchone()[0]
        if self.local.idle_held and listener.execute(
                "SELECT CASE WHEN pg_try_advisory_lock(%s) THEN pg_advisory_unlock(%s) "
                "ELSE false END", [PUSH_LOCK, PUSH_LOCK]).fetchone()[0]:
            self.local.idle = True
            self.local.quiet_until = None  # looked at again before the first long wait
            self.local.idle_retry = IDLE_LOCK_RETRY
            return
        retry = getattr(self.local, "idle_retry", IDLE_LOCK_RETRY)
        self.local.idle_retry = min(retry * 2, max(timeout, IDLE_LOCK_RETRY))
        stop.wait(min(retry, timeout))

    def _leave_idle(self, listener: Any) -> None:
        """Let go of IDLE_LOCK, woken: pushes made while this worker is busy need not
        notify. (Woken by its timeout instead, a worker keeps it: held a little longer
        than needed, it costs pushes a notification, never a lost wake-up.) And of
        QUIET_LOCK, in the same statement: both go in one round trip, which is on the
        way from the push to the job."""
        self._let_go(listener, "idle_held", "quiet_held")
        self.local.idle = False

    def quiet(self) -> bool:
        """PostgreSQL: this thread's worker waits with IDLE_LOCK (every push notifies
        it), heard nothing since, and its last look found it quiet (`_quiet_for`)."""
        until = getattr(self.local, "quiet_until", None)
        return (until is not None and getattr(self.local, "idle", False)
                and time.time() < until)

    def _quiet_for(self, listener: Any, queues: Sequence[str], timeout: float,
                   longest: float) -> float:
        """Seconds to wait: until the next delayed job of `queues` is due, at most
        `longest`; if one is already due (claimed meanwhile, or about to be), `timeout`.

        Once per idle spell, and again when a quiet spell ends, the worker also looks
        whether a sweep would find work (BUSY), holding QUIET_LOCK and once no
        claim is in flight (postgres.py). If none would, and no job of its queues is
        due, it is quiet until the next one is: no job can be claimed before then
        without a push or a claim, both of which notify it, so it waits on asking
        nothing, no sweep and no claim (Worker._round), however often its wait times
        out; for QUIET_LONGEST at most, for the rows written past the store (a job
        row inserted or moved by hand, which notifies no one).
        """
        until = getattr(self.local, "quiet_until", None)
        if until is None or until <= time.time():
            self.local.quiet_until = None
            due = self._next_due(queues)
            now = timezone.now()
            if due is not None and due <= now:
                self._release_quiet_lock(listener)
                return timeout
            if (not self._hold_quiet_lock(listener)
                    or execute(self.connection, BUSY, [], fetch=True)[0][0][0]):
                self._release_quiet_lock(listener)
                wait = max(timeout, longest)
                return wait if due is None else min(wait, (due - now).total_seconds())
            until = time.time() + QUIET_LONGEST
            if due is not None:
                until = min(until, due.timestamp())
            self.local.quiet_until = until
        left = until - time.time()
        return timeout if left <= 0 else min(max(timeout, longest), left)

    def _hold_quiet_lock(self, listener: Any) -> bool:
        """Hold QUIET_LOCK, shared, and say whether no claim that may not have seen it
        is uncommitted (postgres.LOOK); the caller then looks at what is claimed."""
        if getattr(self.local, "quiet_held", False):
            # Held since a look that found nothing claimed: every claim since notified.
            return True
        look = listener.execute(LOOK).fetchone()[0]
        self.local.quiet_held = look is not None
        return bool(look)

    def _release_quiet_lock(self, listener: Any) -> None:
        """Let go of QUIET_LOCK: claims need not wake this worker."""
        self._let_go(listener, "quiet_held")

    def _let_go(self, listener: Any, *flags: str) -> None:
        """Let go, in one statement, of the locks these flags of this thread say its
        listening session holds (`_HELD`), and clear the flags."""
        held = [lock for lock, flag in _HELD if flag in flags and getattr(self.local, flag, False)]
        if held:
            listener.execute(
                "SELECT " + ", ".join(["pg_advisory_unlock_shared(%s)"] * len(held)), held)
        for flag in flags:
            setattr(self.local, flag, False)

    def _wait_sqlite(self, queues: Sequence[str], timeout: float, stop: threading.Event,
                     longest: float | None) -> None:
        try:
            waiter = self.waiter()
        except Exception:
            self._close_waiter()
            waiter = None
        if waiter is None:
            stop.wait(timeout)
            return
        if longest is not None:
            timeout = max(timeout, longest)  # every commit to the file is seen

        def seconds_to_due() -> float | None:
            due = self._next_due(queues)
            # `now` goes the way a stored time comes back, so both compare alike.
            now = aware(self.connection.ops.adapt_datetimefield_value(timezone.now()))
            return None if due is None else (due - now).total_seconds()

        wait_for_commit(waiter, timeout, stop, seconds_to_due)

    def waiter(self) -> Waiter | None:
        """This thread's SQLite waiter on the store's database file (see Waiter)."""
        waiter = getattr(self.local, "waiter", None)
        name = str(self.connection.settings_dict["NAME"])
        if waiter is not None and (waiter.pid != os.getpid() or waiter.database != name):
            # A forked child must not use its parent's connection; the test runner
            # may point the alias at another file.
            self._close_waiter()
            waiter = None
        if waiter is None:
            waiter = self.local.waiter = open_waiter(self.connection)
        return waiter

    def _close_waiter(self) -> None:
        waiter = getattr(self.local, "waiter", None)
        self.local.waiter = None
        if waiter is not None and waiter.pid == os.getpid():
            with contextlib.suppress(Exception):
                waiter.close()

    def _listen(self) -> tuple[Any, bool] | None:
        """This thread's listening connection, and whether it was made just now; None
        when the listening connection goes through a pooler (the worker polls)."""
        if self._listen_refused:
            return None
        listener = getattr(self.local, "listener", None)
        if listener is not None and not listener.closed:
            return listener, False
        import psycopg

        self.connection.ensure_connection()
        alias = settings.LISTEN_DATABASE or self.database
        params = connections[alias].get_connection_params()
        for unused in ("cursor_factory", "context", "prepare_threshold", "pool"):
            params.pop(unused, None)
        listener = psycopg.connect(**params, autocommit=True)
        if behind_pooler(listener):
            listener.close()
            self._listen_refused = True
            logger.warning(
                "The database %r reaches PostgreSQL through a pooler, where LISTEN hears "
                "nothing: idle workers look for jobs every %g s (LATERITE_QUEUE_POLL) "
                "instead of being woken by a push. %s", alias, settings.POLL,
                LISTEN_HINT, extra={"action": "listen_through_pooler", "database": alias},
            )
            return None
        listener.execute(f"LISTEN {CHANNEL}")
        self.local.listener = listener
        return listener, True

    def _close_listener(self) -> None:
        # The locks go with the session.
        self.local.idle = self.local.idle_held = self.local.quiet_held = False
        listener = getattr(self.local, "listener", None)
        if listener is not None:
            try:  # noqa: SIM105 -- a dead connection may fail to close; that is fine
                listener.close()
            except Exception:
                pass
            self.local.listener = None


# -- SQLite: the file's commits --------------------------------------------------

class FileWatch:
    """Tells when one of a database's files was written since the last `wait`."""

    def __init__(self, inotify: Any, names: frozenset[str]) -> None:
        self._inotify = inotify
        self._names = names

    def wait(self, seconds: float) -> bool:
        """Return True as soon as a database file is (or was, since the last call)
        written; False once `seconds` pass without that."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            events = self._inotify.read(timeout=max(0, int(left * 1000)))
            if any(event.name in self._names for event in events):
                return True
            if left <= 0:
                return False

    def close(self) -> None:
        self._inotify.close()


def open_watch(path: str) -> FileWatch | None:
    """A watch on the database file `path` (and its -wal and -journal), or None where
    inotify cannot serve (see the module docstring)."""
    try:
        from inotify_simple import INotify, flags  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None
    directory, name = os.path.split(os.path.abspath(path))
    mask = flags.MODIFY | flags.CLOSE_WRITE | flags.CREATE | flags.MOVED_TO
    try:
        inotify = INotify(nonblocking=True)
    except OSError:  # no inotify here, or too many instances (fs.inotify.max_user_instances)
        return None
    try:
        inotify.add_watch(directory, mask)
    except OSError:
        inotify.close()
        return None
    return FileWatch(inotify, frozenset({name, f"{name}-wal", f"{name}-journal"}))


# Seconds between two looks at the database's data_version while a worker waits:
# a push starts about half of this later on average, plus the claim. Each look
# costs a thread wake-up and one PRAGMA (two fcntl calls on the WAL index in WAL
# mode), some 60-130 us of CPU on a shared 2-core VM: every 20 ms an idle
# `queue_work` used 0.6-0.7% of a core there (0.05% when it slept out
# LATERITE_QUEUE_POLL); every 10 ms it used 1.2%. Where the kernel can tell of
# writes to the file (FileWatch), the waiter sleeps until one instead, and this
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
        self._debounce_until = 0.0  # after a write woke it, no watch before then
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
        if now < self._debounce_until:
            time.sleep(min(self._debounce_until - now, seconds))
            return
        if self._watch.wait(min(WATCHED_LOOK_EVERY, seconds)):
            self._debounce_until = time.monotonic() + WAKE_CHECK_EVERY

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


def wait_for_commit(
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
