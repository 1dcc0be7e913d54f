"""Jobs kept in the `Job` table through the Django connection (PostgreSQL or SQLite).

The hot path speaks SQL on the connection Django already holds: a claim is one
statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite takes its write lock
for the statement, so claims are serialized), finished jobs are deleted in the
same statement as the next claim, and no model is instantiated. On PostgreSQL
a push notifies the `laterite` channel, so idle workers wake at once; on SQLite
an idle worker watches the file's data_version (`sql_sqlite.Waiter`).

This module holds the flow, the same on both databases (the claim in
`database_claim`); the statements that differ are in `sql_postgres` and
`sql_sqlite`, the shared ones in `sql`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from ..crash_points import crash_point
from ..minutes import KEEP, Minute
from ..workflows.ending import any_marked
from . import (
    database_flow,
    database_schedules,
    database_workflows,
    sql,
    sql_limits,
    sql_postgres,
    sql_sqlite,
)
from .base import Claim, NewJob, Store, job_ids
from .database_claim import DatabaseClaiming
from .database_reads import DatabaseReads
from .database_wait import DatabaseWaiting, aware
from .errors import guarded
from .pg_callers_transaction import keeps_callers_settings
from .schedule_state import Fired, ScheduleFire, ScheduleState
from .vacuum import Vacuum

__all__ = ["CHANNEL", "DatabaseStore"]

CHANNEL = sql.CHANNEL


class DatabaseStore(DatabaseClaiming, DatabaseReads, DatabaseWaiting, Store):
    """The `database` store: PostgreSQL or SQLite, on LATERITE_QUEUE_DATABASE."""

    transactional_push = True

    def __init__(self, *, database: str = "default") -> None:
        super().__init__(database=database)
        # Each thread that waits LISTENs on a psycopg connection of its own.
        self._local = threading.local()
        self._dialect: ModuleType | None = None
        self._vacuum = Vacuum()
        self._pruned_before: datetime | None = None  # add_minutes: old counts removed

    def __repr__(self) -> str:
        return f"<DatabaseStore database={self.database!r}>"

    # -- plumbing ---------------------------------------------------------------

    @property
    def connection(self):
        return connections[self.database]

    @property
    def postgres(self) -> bool:
        return self.connection.vendor == "postgresql"

    @property
    def dialect(self) -> ModuleType:
        """The module of statements for this database: `sql_postgres` or `sql_sqlite`."""
        if self._dialect is None:
            self._dialect = sql_postgres if self.postgres else sql_sqlite
        return self._dialect

    def _ts(self, value: datetime | None) -> Any:
        return None if value is None else self.connection.ops.adapt_datetimefield_value(value)

    def _execute(self, statement: str, params: Sequence[Any], fetch: bool = False
                 ) -> tuple[list, int]:
        """Run one statement on Django's connection; return (rows, rowcount)."""
        return sql.execute(self.connection, statement, params, fetch)

    def _hot(self, statement: str, params: Sequence[Any], fetch: bool = False
             ) -> tuple[list, int]:
        """Run a statement of the hot path (prepared on PostgreSQL)."""
        return self.dialect.execute_hot(self.connection, statement, params, fetch)

    def _run_all(self, statements: Sequence[tuple[str, list]]) -> list:
        """Run statements in one transaction (one commit); return the rows of all."""
        if len(statements) == 1:
            return self._hot(*statements[0], fetch=True)[0]
        rows: list = []
        with transaction.atomic(using=self.database):
            for statement, params in statements:
                rows += self._hot(statement, params, fetch=True)[0]
        return rows

    # -- push -------------------------------------------------------------------

    @guarded
    def push(self, jobs: Sequence[NewJob]) -> list[int | None]:
        if not jobs:
            return []
        if len(jobs) == 1 and not jobs[0].concurrency_limit:
            # The push most code makes: one statement, no bookkeeping of keys.
            dialect = self._dialect or self.dialect
            return [dialect.push_one(connections[self.database], jobs[0], self._ts)]
        if any(job.concurrency_limit for job in jobs):
            # Jobs with a concurrency limit carry its key (sql_limits), set in the same
            # transaction, so no worker sees them without it.
            with transaction.atomic(using=self.database):
                ids = self._push(jobs)
                sql_limits.set_keys(self, jobs, ids)
            return ids
        return self._push(jobs)

    def _push(self, jobs: Sequence[NewJob]) -> list[int | None]:
        # Within one batch the first job with a key wins, as if pushed one by one.
        seen: set[str] = set()
        keep: list[bool] = []
        for job in jobs:
            keep.append(job.unique_key is None or job.unique_key not in seen)
            if job.unique_key is not None:
                seen.add(job.unique_key)
        rows = [job for job, fresh in zip(jobs, keep, strict=True) if fresh]
        returned = [row[:2] for row in self._run_all(self.dialect.push(rows, self._ts))]
        # Ids follow the VALUES order; a keyed row missing from them was a duplicate
        # of a job already waiting.
        returned.sort()
        inserted_keys = {key for _, key in returned if key is not None}
        ids = iter(row_id for row_id, _ in returned)
        result: list[int | None] = []
        for job, fresh in zip(jobs, keep, strict=True):
            if fresh and (job.unique_key is None or job.unique_key in inserted_keys):
                result.append(next(ids))
            else:
                result.append(None)
        return result

    # -- claim (database_claim.py) -------------------------------------------------

    def flush(self) -> bool:
        pushed = getattr(self._local, "callbacks_pushed", False)
        self._local.callbacks_pushed = False
        return pushed

    @guarded
    def requeue_abandoned(self, retry_after: float, reason: str) -> int:
        statement, params = self.dialect.requeue_abandoned(reason, float(retry_after))
        database_workflows.finish_orphans(self)  # batches a dead worker counted to 0
        crash_point("sweep.after_orphans")
        limit, total = self.dialect.SWEEP_BATCH, 0
        while True:
            try:
                count = self._execute(statement, params)[1]
            except IntegrityError:
                # A job with the same key was pushed meanwhile: requeue without the key.
                count = self._execute(sql.without_key(statement), params)[1]
            total += count
            if limit is None or count < limit:
                crash_point("sweep.after_requeue")
                return total

    @guarded
    def next_due(self, queues: Sequence[str]) -> datetime | None:
        if not queues:
            return None
        rows, _ = self._execute(sql.next_due(len(queues)), list(queues), fetch=True)
        return aware(rows[0][0])

    @guarded
    def make_due(self, ids: Iterable[int]) -> int:
        wanted = job_ids(ids)
        if not wanted:
            return 0
        statements = self.dialect.make_due(wanted, self._ts(timezone.now()))
        return len(self._run_all(statements))

    @guarded
    def heartbeat(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        ids = sorted({c.id for c in claims})
        tokens = sorted({c.token for c in claims})
        return self._execute(sql.heartbeat(len(ids), len(tokens), self.dialect.NOW),
                             [*ids, *tokens])[1]

    # -- settle -----------------------------------------------------------------

    @guarded
    @keeps_callers_settings
    def delete(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        if any_marked(claims):
            return database_workflows.delete_marked(self, claims)
        if self.dialect is sql_postgres:
            deleted = sql_postgres.run_delete(self.connection, claims)
            if deleted is not None:
                return deleted
        return self._hot(*self.dialect.delete(claims))[1]

    @guarded
    def release(
        self, claim: Claim, available_at: datetime | timedelta, error: str = "", *,
        uncharged: bool = False, started: bool = True,
    ) -> bool:
        value: Any
        due, value = "%s", available_at
        if isinstance(available_at, timedelta):
            if self.dialect is sql_postgres:  # counted by the server's clock
                due, value = sql_postgres.AFTER_NOW, available_at.total_seconds()
            else:  # SQLite: one host, whose clock is the store's
                value = timezone.now() + available_at
        if isinstance(value, datetime):
            value = self._ts(value)
        statement, params = self.dialect.waking(
            sql.release(uncharged, started, due), [value, error, claim.id, claim.token])
        try:
            return self._hot(statement, params)[1] == 1
        except IntegrityError:
            # Another job with this key was pushed between the check and the write.
            return self._hot(sql.without_key(statement), params)[1] == 1

    @guarded
    def fail(self, claim: Claim, error: str) -> int | None:
        now = self._ts(timezone.now())
        with transaction.atomic(using=self.database):
            rows, _ = self._execute(sql.FAIL_DELETE, [claim.id, claim.token], fetch=True)
            if not rows:
                return None
            failed, _ = self._execute(sql.FAIL_INSERT, [*rows[0], now, error], fetch=True)
            if any_marked([claim]):
                database_workflows.fail_counted(self, claim)
            crash_point("fail.before_commit")  # dies: rolled back, the claim still held
            return failed[0][0]

    # -- schedules (database_schedules.py) -----------------------------------------

    @guarded
    def schedule_states(self, names: Sequence[str]) -> dict[str, ScheduleState]:
        return database_schedules.states(self, names)

    @guarded
    def add_schedules(self, names: Sequence[str], since: datetime) -> int:
        return database_schedules.add(self, names, since)

    @guarded
    def define_schedules(self, rules: Mapping[str, str], now: datetime) -> list[str]:
        return database_schedules.define(self, rules, now)

    @guarded
    def remove_schedules(self, keep: Sequence[str]) -> int:
        return database_schedules.remove(self, keep)

    @guarded
    def fire_schedule(self, fire: ScheduleFire) -> Fired:
        return database_schedules.fire(self, fire)

    @guarded
    def pause_schedule(self, name: str, paused: bool, now: datetime) -> ScheduleState:
        return database_schedules.pause(self, name, paused, now)

    # -- inspect and manage -------------------------------------------------------

    @guarded
    def save_progress(self, items: Sequence[tuple[Claim, str]]) -> int:
        saved = 0
        with transaction.atomic(using=self.database):
            for claim, text in items:
                saved += self._execute(sql.SAVE_PROGRESS, [text, claim.id, claim.token])[1]
        return saved

    @guarded
    def add_minutes(self, minutes: Sequence[Minute]) -> None:
        if not minutes:
            return
        first = min(m.minute for m in minutes)
        with transaction.atomic(using=self.database):
            for m in minutes:
                self._execute(sql.ADD_MINUTE,
                              [m.queue, self._ts(m.minute), m.succeeded, m.failed])
            if self._pruned_before is None or first > self._pruned_before:
                # Once a minute per worker: let the old minutes go.
                self._pruned_before = first
                self._execute(sql.PRUNE_MINUTES, [self._ts(first - KEEP)])

    @guarded
    def clear(self, queue: str | None = None) -> int:
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ValueError(f"queue is {queue!r}; name a queue, or pass None for every queue.")
        deleted = database_workflows.clear(self, queue)
        self._vacuum.after_clear(self.connection, deleted)
        return deleted

    @guarded
    def tidy(self) -> int:
        if not self.postgres:
            return 0  # SQLite reuses the space of deleted rows: nothing piles up
        return self._vacuum.maybe(self.connection)

    @guarded
    def ping(self) -> None:
        self._execute(sql.PING, [])

    # -- flow control (database_flow) ------------------------------------------------

    @guarded
    def pause(self, queues: Sequence[str]) -> None:
        database_flow.pause(self, queues)

    @guarded
    def resume(self, queues: Sequence[str]) -> None:
        database_flow.resume(self, queues)

    @guarded
    def paused_queues(self) -> set[str]:
        return database_flow.paused_queues(self)

    @guarded
    def cancel(self, ids: Iterable[int]) -> dict[int, str]:
        return database_flow.cancel(self, ids)

    @guarded
    def cancel_requested(self, claims: Sequence[Claim]) -> set[int]:
        return database_flow.cancel_requested(self, claims)

    @guarded
    def drop_batch(self, batch_id: int) -> int:
        return database_workflows.drop_batch(self, batch_id)

    @guarded
    def close(self) -> None:
        self._close_listener()
        self._close_waiter()
        self.connection.close()
