"""Keep dead rows from slowing the claim: the workers vacuum the job table (PostgreSQL).

Every job leaves dead row versions behind (the claim's UPDATE, then the DELETE),
and so does `queue_clear`. Until VACUUM removes them, each claim's index scan
steps over their entries before it finds a due job: after a million jobs
cleared, a claim took four times as long. Autovacuum removes them in time when
it runs at its defaults and nothing holds it back; where it is off, lags behind
a burst, or runs rarely on a big database, the workers do it themselves: when
the table's dead rows pass `DEAD_ROWS` and a fifth of its live ones, one worker
at a time runs a plain VACUUM of the table. It takes no lock that stops a push
or a claim. It is not tried while a transaction has been open on the database
for more than `LONG_TRANSACTION` seconds, as that transaction would keep VACUUM
from removing anything. A `clear` that deleted that many rows vacuums at once
(`after_clear`), outside a caller's transaction: the claims that follow it then
never step over the cleared backlog, and the heap's emptied tail is handed back.

One at a time, without session state: `VACUUM (SKIP_LOCKED)` passes over the
table while another vacuum (a worker's, autovacuum's) holds it. A session
advisory lock would not do behind a transaction pooler (PgBouncer): each
statement may run on another server connection, so the lock taken on one is
never released by the unlock sent on the next, and stays held by whichever
client gets that server connection afterwards.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import DatabaseError

from .sql import TABLE

__all__ = ["DEAD_ROWS", "LONG_TRANSACTION", "Vacuum"]

logger = logging.getLogger("laterite")

# Vacuum once this many dead rows have piled up (and a fifth of the live rows).
DEAD_ROWS = 20_000
# A transaction open this long holds dead rows back: do not vacuum for nothing.
LONG_TRANSACTION = 60.0
# After a vacuum that could not be run or removed too little, wait this long.
BACK_OFF = 300.0
# The SQLSTATE of VACUUM's "skipping vacuum of ... --- lock not available" warning.
_LOCK_NOT_AVAILABLE = "55P03"

_DEAD = (
    "SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables "
    "WHERE relid = %s::regclass"
)
_LONG_TRANSACTIONS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL "
    "AND xact_start < now() - make_interval(secs => %s)"
)


class Vacuum:
    """When the job table has enough dead rows, vacuum it; then wait a while.

    `maybe(connection)` is cheap when nothing is due (one read of the table's
    statistics) and returns the dead rows the vacuum removed, 0 when it did not
    run. It never raises for a vacuum it could not do: it backs off instead.
    """

    def __init__(self) -> None:
        self._not_before = 0.0

    def maybe(self, connection: Any) -> int:
        if not _can_vacuum(connection) or time.monotonic() < self._not_before:
            return 0
        with connection.cursor() as cursor:
            dead = _dead_rows(cursor)
            if dead is None:
                return 0
            return self._vacuum(connection, cursor, dead)

    def after_clear(self, connection: Any, deleted: int) -> int:
        """Vacuum now if a clear just deleted `deleted` rows, at least `DEAD_ROWS`; return
        the dead rows removed (0: not run). The statistics may not show them yet."""
        if deleted < DEAD_ROWS or not _can_vacuum(connection):
            return 0
        try:
            with connection.cursor() as cursor:
                return self._vacuum(connection, cursor, deleted)
        except DatabaseError:
            # The clear is done: a vacuum that fails (a statement timeout) is left to
            # the workers' next look, not turned into an error of the clear.
            logger.warning("Could not vacuum the job table after a clear of %d jobs", deleted,
                           exc_info=True, extra={"action": "vacuum_failed", "dead_rows": deleted})
            return 0

    def _vacuum(self, connection: Any, cursor: Any, dead: int) -> int:
        cursor.execute(_LONG_TRANSACTIONS, [LONG_TRANSACTION])
        if cursor.fetchone()[0]:
            logger.info(
                "The job table has %d dead rows, but a transaction open for more than "
                "%g s would keep VACUUM from removing them; trying again later",
                dead, LONG_TRANSACTION, extra={"action": "vacuum_held_back", "dead_rows": dead},
            )
            self._not_before = time.monotonic() + BACK_OFF
            return 0
        started = time.monotonic()
        skipped: list[object] = []

        def on_notice(diagnostic: Any) -> None:
            if diagnostic.sqlstate == _LOCK_NOT_AVAILABLE:
                skipped.append(diagnostic)

        raw = connection.connection
        raw.add_notice_handler(on_notice)
        try:
            cursor.execute(f"VACUUM (SKIP_LOCKED) {TABLE}")
        finally:
            raw.remove_notice_handler(on_notice)
        if skipped:
            return 0  # another vacuum holds the table now
        left = _dead_rows(cursor, at_least=0) or 0
        removed = max(0, dead - left)
        logger.info(
            "Vacuumed the job table: %d dead rows removed in %.2f s", removed,
            time.monotonic() - started,
            extra={"action": "vacuumed", "dead_rows": removed, "left": left},
        )
        if left >= DEAD_ROWS:
            # Held back all the same (a replication slot, a standby's query), or the
            # table is not ours to vacuum: do not try again at once.
            self._not_before = time.monotonic() + BACK_OFF
        return removed


def _can_vacuum(connection: Any) -> bool:
    """PostgreSQL, outside a transaction (VACUUM cannot run in one: testing.run_jobs,
    atomic())."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def _dead_rows(cursor: Any, at_least: int | None = None) -> int | None:
    """The table's dead rows if they are worth a vacuum (or if above `at_least`)."""
    cursor.execute(_DEAD, [TABLE])
    row = cursor.fetchone()
    if row is None:
        return None
    dead, live = int(row[0] or 0), int(row[1] or 0)
    if at_least is not None:
        return dead if dead > at_least else None
    return dead if dead >= max(DEAD_ROWS, live // 5) else None
