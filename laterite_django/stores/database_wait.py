"""How an idle worker waits on the database store: on PostgreSQL for a NOTIFY on a
listening connection of its thread's own, on SQLite for another connection's
commit (`sql_sqlite.Waiter`), never past the next delayed job's time.

A LISTEN through a transaction pooler (PgBouncer in `pool_mode = transaction`)
listens on a server connection the listener gives back at once: no notification
ever reaches it. The listening connection is opened on LATERITE_QUEUE_LISTEN_DATABASE
when set (an alias that reaches PostgreSQL directly), else on the store's own
database; a listener found behind a pooler (`pooler.behind_pooler`) is closed and
the worker polls every LATERITE_QUEUE_POLL seconds instead, saying so once.

While it waits for a notification, a worker holds the advisory lock IDLE_LOCK,
shared, on its listening connection: pushes notify only while some worker holds
it (see sql_postgres). It takes the lock, checks that no push that may not have
notified is uncommitted, claims once more before it waits (so such a push is
seen), and lets go of the lock when woken. Once it has looked and found nothing
claimed and nothing due (`_quiet_for`), it is quiet: until a notification or its
next delayed job, it asks the database nothing at all. While quiet it holds
QUIET_LOCK, shared, so that the next claim of a job anywhere wakes it (pg_quiet).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload

from django.db import connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..conf import settings
from . import pg_quiet, sql, sql_sqlite
from .base import QUIET_LONGEST
from .pooler import behind_pooler
from .sql import CHANNEL, IDLE_LOCK, PUSH_LOCK, QUIET_LOCK

__all__ = ["LISTEN_HINT", "DatabaseWaiting", "aware"]

logger = logging.getLogger("laterite")

# A worker that finds a push uncommitted (PUSH_LOCK held) as it goes idle looks again
# after this long, then twice as long each time, up to its poll interval.
IDLE_LOCK_RETRY = 0.005

# The shared advisory locks a worker's listening session may hold, each with the flag
# of the thread's state that says it does: IDLE_LOCK while it waits (`_go_idle`),
# QUIET_LOCK while it is quiet (`_hold_quiet`).
_HELD = ((IDLE_LOCK, "marked"), (QUIET_LOCK, "quiet_held"))

LISTEN_HINT = (
    "Set LATERITE_QUEUE_LISTEN_DATABASE to a database alias that reaches the same "
    "PostgreSQL directly (not through the pooler), so pushes wake idle workers at once."
)


@overload
def aware(value: None) -> None: ...
@overload
def aware(value: datetime | str) -> datetime: ...
def aware(value: datetime | str | None) -> datetime | None:
    """Return a stored timestamp as an aware datetime (SQLite hands back text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return value


class DatabaseWaiting:
    """DatabaseStore's `wait` (a mixin of DatabaseStore)."""

    _local: threading.local
    # Set once a listening connection was found behind a pooler: poll from then on.
    _listen_refused = False
    database: str

    if TYPE_CHECKING:  # the store's own
        @property
        def connection(self) -> Any: ...
        @property
        def postgres(self) -> bool: ...
        def next_due(self, queues: Sequence[str]) -> datetime | None: ...
        def _execute(self, statement: str, params: Sequence[Any], fetch: bool = False
                     ) -> tuple[list, int]: ...
        def _ts(self, value: datetime | None) -> Any: ...

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
        if not self.postgres:
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
            if not getattr(self._local, "idle", False):
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
                        self._unquiet(listener)
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
        if not getattr(self._local, "marked", False):
            # Tried, never waited for: a push holds it exclusive only for an instant,
            # and a worker must not hang on a session that kept it (a push cancelled
            # between its try and its unlock); such a worker looks every poll instead.
            self._local.marked = listener.execute(
                "SELECT pg_try_advisory_lock_shared(%s)", [IDLE_LOCK]).fetchone()[0]
        if self._local.marked and listener.execute(
                "SELECT CASE WHEN pg_try_advisory_lock(%s) THEN pg_advisory_unlock(%s) "
                "ELSE false END", [PUSH_LOCK, PUSH_LOCK]).fetchone()[0]:
            self._local.idle = True
            self._local.quiet_until = None  # looked at again before the first long wait
            self._local.idle_retry = IDLE_LOCK_RETRY
            return
        retry = getattr(self._local, "idle_retry", IDLE_LOCK_RETRY)
        self._local.idle_retry = min(retry * 2, max(timeout, IDLE_LOCK_RETRY))
        stop.wait(min(retry, timeout))

    def _leave_idle(self, listener: Any) -> None:
        """Let go of IDLE_LOCK, woken: pushes made while this worker is busy need not
        notify. (Woken by its timeout instead, a worker keeps it: held a little longer
        than needed, it costs pushes a notification, never a lost wake-up.) And of
        QUIET_LOCK, in the same statement: both go in one round trip, which is on the
        way from the push to the job."""
        self._let_go(listener, "marked", "quiet_held")
        self._local.idle = False

    def quiet(self) -> bool:
        """PostgreSQL: this thread's worker waits with IDLE_LOCK (every push notifies
        it), heard nothing since, and its last look found it quiet (`_quiet_for`)."""
        until = getattr(self._local, "quiet_until", None)
        return (until is not None and getattr(self._local, "idle", False)
                and time.time() < until)

    def _quiet_for(self, listener: Any, queues: Sequence[str], timeout: float,
                   longest: float) -> float:
        """Seconds to wait: until the next delayed job of `queues` is due, at most
        `longest`; if one is already due (claimed meanwhile, or about to be), `timeout`.

        Once per idle spell, and again when a quiet spell ends, the worker also looks
        whether a sweep would find work (sql.BUSY), holding QUIET_LOCK and once no
        claim is in flight (pg_quiet). If none would, and no job of its queues is
        due, it is quiet until the next one is: no job can be claimed before then
        without a push or a claim, both of which notify it, so it waits on asking
        nothing, no sweep and no claim (Worker._round), however often its wait times
        out; for QUIET_LONGEST at most, for the rows written past the store (a job
        row inserted or moved by hand, which notifies no one).
        """
        until = getattr(self._local, "quiet_until", None)
        if until is None or until <= time.time():
            self._local.quiet_until = None
            due = self.next_due(queues)
            now = timezone.now()
            if due is not None and due <= now:
                self._unquiet(listener)
                return timeout
            if (not self._hold_quiet(listener)
                    or self._execute(sql.BUSY, [], fetch=True)[0][0][0]):
                self._unquiet(listener)
                wait = max(timeout, longest)
                return wait if due is None else min(wait, (due - now).total_seconds())
            until = time.time() + QUIET_LONGEST
            if due is not None:
                until = min(until, due.timestamp())
            self._local.quiet_until = until
        left = until - time.time()
        return timeout if left <= 0 else min(max(timeout, longest), left)

    def _hold_quiet(self, listener: Any) -> bool:
        """Hold QUIET_LOCK, shared, and say whether no claim that may not have seen it
        is uncommitted (pg_quiet.LOOK); the caller then looks at what is claimed."""
        if getattr(self._local, "quiet_held", False):
            # Held since a look that found nothing claimed: every claim since notified.
            return True
        look = listener.execute(pg_quiet.LOOK).fetchone()[0]
        self._local.quiet_held = look is not None
        return bool(look)

    def _unquiet(self, listener: Any) -> None:
        """Let go of QUIET_LOCK: claims need not wake this worker."""
        self._let_go(listener, "quiet_held")

    def _let_go(self, listener: Any, *flags: str) -> None:
        """Let go, in one statement, of the locks these flags of this thread say its
        listening session holds (`_HELD`), and clear the flags."""
        held = [lock for lock, flag in _HELD if flag in flags and getattr(self._local, flag, False)]
        if held:
            listener.execute(
                "SELECT " + ", ".join(["pg_advisory_unlock_shared(%s)"] * len(held)), held)
        for flag in flags:
            setattr(self._local, flag, False)

    def _wait_sqlite(self, queues: Sequence[str], timeout: float, stop: threading.Event,
                     longest: float | None) -> None:
        try:
            waiter = self._waiter()
        except Exception:
            self._close_waiter()
            waiter = None
        if waiter is None:
            stop.wait(timeout)
            return
        if longest is not None:
            timeout = max(timeout, longest)  # every commit to the file is seen

        def seconds_to_due() -> float | None:
            due = self.next_due(queues)
            # `now` goes the way a stored time comes back, so both compare alike.
            now = aware(self._ts(timezone.now()))
            return None if due is None else (due - now).total_seconds()

        sql_sqlite.wait(waiter, timeout, stop, seconds_to_due)

    def _waiter(self) -> sql_sqlite.Waiter | None:
        """This thread's SQLite waiter on the store's database file (see sql_sqlite)."""
        waiter = getattr(self._local, "waiter", None)
        name = str(self.connection.settings_dict["NAME"])
        if waiter is not None and (waiter.pid != os.getpid() or waiter.database != name):
            # A forked child must not use its parent's connection; the test runner
            # may point the alias at another file.
            self._close_waiter()
            waiter = None
        if waiter is None:
            waiter = self._local.waiter = sql_sqlite.open_waiter(self.connection)
        return waiter

    def _close_waiter(self) -> None:
        waiter = getattr(self._local, "waiter", None)
        self._local.waiter = None
        if waiter is not None and waiter.pid == os.getpid():
            with contextlib.suppress(Exception):
                waiter.close()


    def _listen(self) -> tuple[Any, bool] | None:
        """This thread's listening connection, and whether it was made just now; None
        when the listening connection goes through a pooler (the worker polls)."""
        if self._listen_refused:
            return None
        listener = getattr(self._local, "listener", None)
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
        self._local.listener = listener
        return listener, True

    def _close_listener(self) -> None:
        # The locks go with the session.
        self._local.idle = self._local.marked = self._local.quiet_held = False
        listener = getattr(self._local, "listener", None)
        if listener is not None:
            try:  # noqa: SIM105 -- a dead connection may fail to close; that is fine
                listener.close()
            except Exception:
                pass
            self._local.listener = None
