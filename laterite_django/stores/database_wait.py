"""How an idle worker waits on the database store: on PostgreSQL for a NOTIFY on a
listening connection of its thread's own, on SQLite for another connection's
commit (`sql_sqlite.Waiter`), never past the next delayed job's time."""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import sql_sqlite
from .sql import CHANNEL

__all__ = ["DatabaseWaiting", "aware"]


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

    if TYPE_CHECKING:  # the store's own
        @property
        def connection(self) -> Any: ...
        @property
        def postgres(self) -> bool: ...
        def next_due(self, queues: Sequence[str]) -> datetime | None: ...
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
            listener, new = self._listen()
            if new:
                # A push before LISTEN went unheard: the claim that follows sees it,
                # and every later one is heard.
                return
            if longest is not None:
                timeout = self._until_due(queues, timeout, longest)
            deadline = time.monotonic() + timeout
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                # In slices, so a stop request is seen within a second.
                ready, _, _ = select.select([listener.fileno()], [], [], min(left, 1.0))
                if ready:
                    # Drain what arrived; any notification is a reason to look again.
                    for _ in listener.notifies(timeout=0, stop_after=1000):
                        pass
                    return
        except Exception:
            # A broken listener must not stop the worker: poll until it comes back.
            self._close_listener()
            stop.wait(timeout)

    def _until_due(self, queues: Sequence[str], timeout: float, longest: float) -> float:
        """Seconds until the next delayed job of `queues` is due, at most `longest`; if
        one is already due (claimed meanwhile, or about to be), `timeout`."""
        due = self.next_due(queues)
        if due is None:
            return max(timeout, longest)
        left = (due - timezone.now()).total_seconds()
        return timeout if left <= 0 else min(max(timeout, longest), left)

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


    def _listen(self) -> tuple[Any, bool]:
        """This thread's listening connection, and whether it was made just now."""
        listener = getattr(self._local, "listener", None)
        if listener is not None and not listener.closed:
            return listener, False
        import psycopg

        self.connection.ensure_connection()
        params = self.connection.get_connection_params()
        for unused in ("cursor_factory", "context", "prepare_threshold", "pool"):
            params.pop(unused, None)
        listener = self._local.listener = psycopg.connect(**params, autocommit=True)
        listener.execute(f"LISTEN {CHANNEL}")
        return listener, True

    def _close_listener(self) -> None:
        listener = getattr(self._local, "listener", None)
        if listener is not None:
            try:  # noqa: SIM105 -- a dead connection may fail to close; that is fine
                listener.close()
            except Exception:
                pass
            self._local.listener = None
