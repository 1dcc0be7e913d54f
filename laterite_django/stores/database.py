"""Jobs kept in the `Job` table through the Django connection (PostgreSQL or SQLite).

The hot path speaks SQL on the connection Django already holds: a claim is one
statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite takes its write lock
for the statement, so claims are serialized), finished jobs are deleted in the
same statement as the next claim, and no model is instantiated. On PostgreSQL
a push notifies the `laterite` channel, so idle workers wake at once.
"""

from __future__ import annotations

import select
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..exceptions import StoreUnavailable
from .base import Claim, NewJob, QueueCounts, Store

__all__ = ["CHANNEL", "DatabaseStore"]

TABLE = "laterite_job"
FAILED_TABLE = "laterite_failed_job"
CHANNEL = "laterite"
_COLUMNS = (
    "id, name, queue, payload, attempts, pushed_at, token, retry_until, unique_key, "
    "priority, last_error, available_at"
)
_INSERT_COLUMNS = (
    "name, queue, payload, priority, pushed_at, available_at, attempts, retry_until, "
    "unique_key, claimed_by, last_error"
)
_ROW = "(%s, %s, %s, %s, %s, %s, 0, %s, %s, '', '')"
# Stay under SQLite's bound-parameter limit (32,766); PostgreSQL takes arrays.
_PUSH_CHUNK = 2000
# A released or requeued job keeps its unique key unless another job with that
# key now waits (the key is unique among waiting jobs only).
_KEEP_KEY = (
    f"CASE WHEN unique_key IS NOT NULL AND EXISTS (SELECT 1 FROM {TABLE} other "
    f"WHERE other.unique_key = {TABLE}.unique_key AND other.token IS NULL) "
    f"THEN NULL ELSE unique_key END"
)
_PG_PICK = (
    f"SELECT j.id FROM unnest(%s::varchar[]) WITH ORDINALITY AS q(name, ord) "
    f"CROSS JOIN LATERAL (SELECT id FROM {TABLE} WHERE queue = q.name "
    f"AND token IS NULL AND available_at <= %s "
    f"ORDER BY priority DESC, available_at, id LIMIT %s FOR UPDATE SKIP LOCKED) j "
    f"ORDER BY q.ord LIMIT %s"
)
# Claims and deletions of finished jobs commit without waiting for the WAL flush
# (synchronous_commit off for that transaction alone). Losing one to a crash of
# the database server itself only makes the job claimable again, which is the
# at-least-once rule anyway; pushes and the failed list stay fully durable.
_ASYNC_COMMIT = "set_config('synchronous_commit', 'off', true)"
_PG_CLAIM = (
    f"UPDATE {TABLE} SET token = %s, claimed_at = %s, "
    f"claimed_by = %s || left({_ASYNC_COMMIT}, 0), "
    f"attempts = attempts + 1 FROM ({_PG_PICK}) picked WHERE {TABLE}.id = picked.id "
    f"RETURNING {', '.join(f'{TABLE}.{c}' for c in _COLUMNS.split(', '))}"
)
_PG_PUSH = (
    f"WITH ins AS (INSERT INTO {TABLE} ({_INSERT_COLUMNS}) "
    f"SELECT n, q, p, pr, pa, aa, 0, ru, uk, '', '' FROM unnest("
    f"%s::varchar[], %s::varchar[], %s::text[], %s::int2[], %s::timestamptz[], "
    f"%s::timestamptz[], %s::timestamptz[], %s::varchar[]) AS t(n, q, p, pr, pa, aa, ru, uk) "
    f"ON CONFLICT DO NOTHING RETURNING id, unique_key, queue), "
    f"notified AS (SELECT pg_notify(%s, queue) FROM (SELECT DISTINCT queue FROM ins) q) "
    f"SELECT id, unique_key FROM ins WHERE (SELECT count(*) FROM notified) >= 0"
)
_PG_PUSH_ONE = (
    f"WITH ins AS (INSERT INTO {TABLE} ({_INSERT_COLUMNS}) VALUES {_ROW} "
    f"ON CONFLICT DO NOTHING RETURNING id, unique_key, queue) "
    f"SELECT id, unique_key, pg_notify(%s, queue) FROM ins"
)
_PG_DELETE = (
    f"DELETE FROM {TABLE} USING unnest(%s::bigint[], %s::varchar[]) AS done(id, token) "
    f"WHERE {TABLE}.id = done.id AND {TABLE}.token = done.token "
    f"AND {_ASYNC_COMMIT} IS NOT NULL"
)


def _aware(value: datetime | str | None) -> datetime | None:
    """Return a stored timestamp as an aware datetime (SQLite hands back text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return value


class DatabaseStore(Store):
    """The `database` store: PostgreSQL or SQLite, on LATERITE_QUEUE_DATABASE."""

    transactional_push = True

    def __init__(self, *, database: str = "default") -> None:
        super().__init__(database=database)
        # Each thread that waits LISTENs on a psycopg connection of its own.
        self._local = threading.local()

    @property
    def connection(self):
        return connections[self.database]

    @property
    def postgres(self) -> bool:
        return self.connection.vendor == "postgresql"

    def _ts(self, value: datetime | None) -> Any:
        return None if value is None else self.connection.ops.adapt_datetimefield_value(value)

    def _execute(self, sql: str, params: Sequence[Any], fetch: bool = False) -> tuple[list, int]:
        """Run one statement on Django's connection; return (rows, rowcount)."""
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return (cursor.fetchall() if fetch else []), cursor.rowcount

    def _execute_hot(
        self, sql: str, params: Sequence[Any], fetch: bool = False
    ) -> tuple[list, int]:
        """Run a statement of the hot path: on PostgreSQL, prepared and server-bound.

        It runs on the very connection (and transaction) Django holds, through a
        plain psycopg cursor: arrays travel as arrays, and the plan of each
        statement is made once per connection. Statements are not prepared when
        the database's OPTIONS say `"prepare_threshold": None` (for a pooler that
        cannot keep them, such as PgBouncer before 1.21 in transaction mode).
        """
        connection = self.connection
        if connection.vendor != "postgresql":
            return self._execute(sql, params, fetch)
        import psycopg

        connection.ensure_connection()
        options = connection.settings_dict.get("OPTIONS", {})
        prepare = options.get("prepare_threshold", 0) is not None
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, params, prepare=prepare)
            return (cursor.fetchall() if fetch else []), cursor.rowcount

    def _claim_from_row(self, row: Sequence) -> Claim:
        return Claim(
            id=row[0],
            name=row[1],
            queue=row[2],
            payload=row[3],
            attempts=row[4],
            pushed_at=_aware(row[5]),
            token=row[6],
            retry_until=_aware(row[7]),
            unique_key=row[8],
            priority=row[9],
            last_error=row[10] or "",
            available_at=_aware(row[11]),
        )

    # -- push -------------------------------------------------------------------

    def push(self, jobs: Sequence[NewJob]) -> list[int | None]:
        if self.postgres or len(jobs) <= _PUSH_CHUNK:
            return self._push(jobs)
        return [
            job_id
            for start in range(0, len(jobs), _PUSH_CHUNK)
            for job_id in self._push(jobs[start : start + _PUSH_CHUNK])
        ]

    def _push(self, jobs: Sequence[NewJob]) -> list[int | None]:
        if not jobs:
            return []
        # Within one batch the first job with a key wins, as if pushed one by one.
        seen: set[str] = set()
        keep: list[bool] = []
        for job in jobs:
            keep.append(job.unique_key is None or job.unique_key not in seen)
            if job.unique_key is not None:
                seen.add(job.unique_key)
        rows = [job for job, fresh in zip(jobs, keep, strict=True) if fresh]
        if self.postgres and len(rows) == 1:
            # The statement also tells idle workers; PostgreSQL delivers the
            # notification when the pushing transaction commits, not before.
            job = rows[0]
            sql, params = _PG_PUSH_ONE, [
                job.name, job.queue, job.payload, job.priority, job.pushed_at,
                job.available_at, job.retry_until, job.unique_key, CHANNEL,
            ]
        elif self.postgres:
            # Many rows: one statement of one shape whatever the count, the rows
            # travelling as arrays.
            sql, params = _PG_PUSH, [
                [job.name for job in rows],
                [job.queue for job in rows],
                [job.payload for job in rows],
                [job.priority for job in rows],
                [job.pushed_at for job in rows],
                [job.available_at for job in rows],
                [job.retry_until for job in rows],
                [job.unique_key for job in rows],
                CHANNEL,
            ]
        else:
            params = []
            for job in rows:
                params += [
                    job.name, job.queue, job.payload, job.priority, self._ts(job.pushed_at),
                    self._ts(job.available_at), self._ts(job.retry_until), job.unique_key,
                ]
            sql = (
                f"INSERT INTO {TABLE} ({_INSERT_COLUMNS}) VALUES {', '.join([_ROW] * len(rows))} "
                f"ON CONFLICT DO NOTHING RETURNING id, unique_key"
            )
        returned = [row[:2] for row in self._execute_hot(sql, params, fetch=True)[0]]
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

    # -- claim ------------------------------------------------------------------

    def claim(self, queues: Sequence[str], worker: str, limit: int = 1) -> list[Claim]:
        return self.settle_and_claim((), queues, worker, limit)

    def settle_and_claim(
        self, finished: Sequence[Claim], queues: Sequence[str], worker: str, limit: int = 1
    ) -> list[Claim]:
        token = uuid.uuid4().hex
        now = self._ts(timezone.now())
        if self.postgres:
            # One statement: delete the finished jobs, and for each queue in
            # priority order lock its oldest due rows (skipping rows other workers
            # hold); the nested loop stops as soon as `limit` rows are found.
            params: list = [token, now, worker, list(queues), now, limit, limit]
            sql = _PG_CLAIM
            if finished:
                sql = f"WITH done AS ({_PG_DELETE}) {_PG_CLAIM}"
                params = [[c.id for c in finished], [c.token for c in finished], *params]
            rows, _ = self._execute_hot(sql, params, fetch=True)
        else:
            order = " ".join(f"WHEN %s THEN {i}" for i in range(len(queues)))
            marks = ", ".join(["%s"] * len(queues))
            sql = (
                f"UPDATE {TABLE} SET token = %s, claimed_at = %s, claimed_by = %s, "
                f"attempts = attempts + 1 WHERE id IN ("
                f"SELECT id FROM {TABLE} WHERE queue IN ({marks}) AND token IS NULL "
                f"AND available_at <= %s "
                f"ORDER BY CASE queue {order} END, priority DESC, available_at, id LIMIT %s"
                f") RETURNING {_COLUMNS}"
            )
            params = [token, now, worker, *queues, now, *queues, limit]
            if finished:
                # One transaction, so one commit, for both statements.
                with transaction.atomic(using=self.database):
                    self.delete(finished)
                    rows, _ = self._execute(sql, params, fetch=True)
            else:
                rows, _ = self._execute(sql, params, fetch=True)
        claims = [self._claim_from_row(row) for row in rows]
        rank = {queue: i for i, queue in enumerate(queues)}
        claims.sort(key=lambda c: (rank[c.queue], -c.priority, c.available_at, c.id))
        return claims

    def requeue_abandoned(self, older_than: datetime, reason: str) -> int:
        params = [reason, self._ts(timezone.now()), self._ts(older_than)]
        sql = (
            f"UPDATE {TABLE} SET token = NULL, claimed_at = NULL, claimed_by = '', "
            f"last_error = %s, available_at = %s, unique_key = {_KEEP_KEY} "
            f"WHERE token IS NOT NULL AND claimed_at < %s"
        )
        try:
            return self._execute(sql, params)[1]
        except IntegrityError:
            # A job with the same key was pushed meanwhile: requeue without the key.
            return self._execute(sql.replace(_KEEP_KEY, "NULL"), params)[1]

    def heartbeat(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        tokens = sorted({c.token for c in claims})
        marks = ", ".join(["%s"] * len(tokens))
        return self._execute_hot(
            f"UPDATE {TABLE} SET claimed_at = %s WHERE token IN ({marks})",
            [self._ts(timezone.now()), *tokens],
        )[1]

    # -- settle -----------------------------------------------------------------

    def delete(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        if self.postgres:
            return self._execute_hot(
                _PG_DELETE, [[c.id for c in claims], [c.token for c in claims]]
            )[1]
        pairs = " OR ".join(["(id = %s AND token = %s)"] * len(claims))
        params = [value for c in claims for value in (c.id, c.token)]
        return self._execute(f"DELETE FROM {TABLE} WHERE {pairs}", params)[1]

    def release(
        self, claim: Claim, available_at: datetime, error: str = "", *, undo_attempt: bool = False
    ) -> bool:
        attempts = "attempts - 1" if undo_attempt else "attempts"
        sql = (
            f"UPDATE {TABLE} SET token = NULL, claimed_at = NULL, claimed_by = '', "
            f"attempts = {attempts}, available_at = %s, last_error = %s, "
            f"unique_key = {_KEEP_KEY} WHERE id = %s AND token = %s"
        )
        params = [self._ts(available_at), error, claim.id, claim.token]
        try:
            return self._execute_hot(sql, params)[1] == 1
        except IntegrityError:
            # Another job with this key was pushed between the check and the write.
            return self._execute_hot(sql.replace(_KEEP_KEY, "NULL"), params)[1] == 1

    def fail(self, claim: Claim, error: str) -> int | None:
        now = self._ts(timezone.now())
        with transaction.atomic(using=self.database):
            rows, _ = self._execute(
                f"DELETE FROM {TABLE} WHERE id = %s AND token = %s "
                f"RETURNING id, name, queue, payload, priority, unique_key, attempts, pushed_at, "
                f"retried_from_id, retried_from_error",
                [claim.id, claim.token],
                fetch=True,
            )
            if not rows:
                return None
            rows, _ = self._execute(
                f"INSERT INTO {FAILED_TABLE} (job_id, name, queue, payload, priority, "
                f"unique_key, attempts, pushed_at, retried_from_id, retried_from_error, "
                f"failed_at, error) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                [*rows[0], now, error],
                fetch=True,
            )
            return rows[0][0]

    # -- wait -------------------------------------------------------------------

    def wait(self, queues: Sequence[str], timeout: float, stop: threading.Event) -> None:
        """On PostgreSQL, sleep until a push to one of `queues` is notified."""
        if not self.postgres:
            stop.wait(timeout)
            return
        try:
            listener = self._listen()
            ready, _, _ = select.select([listener.fileno()], [], [], timeout)
            if ready:
                # Drain what arrived; any notification is a reason to look again.
                for _ in listener.notifies(timeout=0, stop_after=1000):
                    pass
        except Exception:
            # A broken listener must not stop the worker: poll until it comes back.
            self._close_listener()
            stop.wait(timeout)

    def _listen(self) -> Any:
        listener = getattr(self._local, "listener", None)
        if listener is None or listener.closed:
            import psycopg

            self.connection.ensure_connection()
            params = self.connection.get_connection_params()
            for unused in ("cursor_factory", "context", "prepare_threshold", "pool"):
                params.pop(unused, None)
            listener = self._local.listener = psycopg.connect(**params, autocommit=True)
            listener.execute(f"LISTEN {CHANNEL}")
        return listener

    def _close_listener(self) -> None:
        listener = getattr(self._local, "listener", None)
        if listener is not None:
            try:  # noqa: SIM105 -- a dead connection may fail to close; that is fine
                listener.close()
            except Exception:
                pass
            self._local.listener = None

    # -- inspect and manage -------------------------------------------------------

    def counts(self) -> dict[str, QueueCounts]:
        now = self._ts(timezone.now())
        rows, _ = self._execute(
            f"SELECT queue, "
            f"SUM(CASE WHEN token IS NULL AND available_at <= %s THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN token IS NULL AND available_at > %s THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN token IS NOT NULL THEN 1 ELSE 0 END) "
            f"FROM {TABLE} GROUP BY queue",
            [now, now],
            fetch=True,
        )
        result = {
            queue: QueueCounts(waiting=int(p or 0), delayed=int(d or 0), running=int(r or 0))
            for queue, p, d, r in rows
        }
        for queue, failed in self.failed_counts().items():
            result.setdefault(queue, QueueCounts()).failed = failed
        return dict(sorted(result.items()))

    def clear(self, queue: str | None = None) -> int:
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ValueError(f"queue is {queue!r}; name a queue, or pass None for every queue.")
        if queue is None:
            return self._execute(f"DELETE FROM {TABLE}", [])[1]
        return self._execute(f"DELETE FROM {TABLE} WHERE queue = %s", [queue])[1]

    def ping(self) -> None:
        try:
            self._execute("SELECT 1", [])
        except Exception as e:
            raise StoreUnavailable(
                f"The database {self.database!r} cannot be reached: {e}"
            ) from e

    def close(self) -> None:
        self._close_listener()
        self.connection.close()
