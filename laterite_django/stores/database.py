"""Jobs kept in the `Job` table through the Django connection (PostgreSQL or SQLite).

The hot path speaks SQL through the connection's cursor: a claim is one
statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite takes its write lock
for the statement, so claims are serialized), and no model is instantiated.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from django.db import IntegrityError, connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..exceptions import StoreUnavailable
from .base import Claim, NewJob, QueueCounts, Store

__all__ = ["DatabaseStore"]

TABLE = "laterite_job"
FAILED_TABLE = "laterite_failed_job"
_COLUMNS = (
    "id, name, queue, payload, attempts, pushed_at, token, retry_until, unique_key, "
    "priority, last_error, available_at"
)
_INSERT_COLUMNS = (
    "name, queue, payload, priority, pushed_at, available_at, attempts, retry_until, "
    "unique_key, claimed_by, last_error"
)
_PUSH_CHUNK = 2000


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

    @property
    def connection(self):
        return connections[self.database]

    @property
    def postgres(self) -> bool:
        return self.connection.vendor == "postgresql"

    def _ts(self, value: datetime | None):
        return None if value is None else self.connection.ops.adapt_datetimefield_value(value)

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
        if len(jobs) <= _PUSH_CHUNK:
            return self._push(jobs)
        # Stay under the drivers' bound-parameter limits (SQLite: 32,766).
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
            fresh = job.unique_key is None or job.unique_key not in seen
            if job.unique_key is not None:
                seen.add(job.unique_key)
            keep.append(fresh)
        rows = [job for job, fresh in zip(jobs, keep, strict=True) if fresh]
        params: list = []
        for job in rows:
            params += [
                job.name,
                job.queue,
                job.payload,
                job.priority,
                self._ts(job.pushed_at),
                self._ts(job.available_at),
                0,
                self._ts(job.retry_until),
                job.unique_key,
                "",
                "",
            ]
        placeholders = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
        sql = (
            f"INSERT INTO {TABLE} ({_INSERT_COLUMNS}) VALUES {placeholders} "
            f"ON CONFLICT DO NOTHING RETURNING id, unique_key"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            returned = cursor.fetchall()
        # RETURNING gives inserted rows in VALUES order; a keyed row absent from it
        # was a duplicate of a job already waiting.
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
        token = uuid.uuid4().hex
        now = self._ts(timezone.now())
        if self.postgres:
            # One statement: for each queue in priority order, lock its oldest due
            # rows (skipping rows other workers hold); the nested loop stops as
            # soon as `limit` rows are found.
            sql = (
                f"UPDATE {TABLE} SET token = %s, claimed_at = %s, claimed_by = %s, "
                f"attempts = attempts + 1 WHERE id IN ("
                f"SELECT j.id FROM unnest(%s::varchar[]) WITH ORDINALITY AS q(name, ord) "
                f"CROSS JOIN LATERAL (SELECT id FROM {TABLE} WHERE queue = q.name "
                f"AND token IS NULL AND available_at <= %s "
                f"ORDER BY priority DESC, available_at, id LIMIT %s "
                f"FOR UPDATE SKIP LOCKED) j ORDER BY q.ord LIMIT %s"
                f") RETURNING {_COLUMNS}"
            )
            params = [token, now, worker, list(queues), now, limit, limit]
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
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        claims = [self._claim_from_row(row) for row in rows]
        rank = {queue: i for i, queue in enumerate(queues)}
        claims.sort(key=lambda c: (rank[c.queue], -c.priority, c.available_at, c.id))
        return claims

    def requeue_abandoned(self, older_than: datetime, reason: str) -> int:
        params = [reason, self._ts(timezone.now()), self._ts(older_than)]
        where = "token IS NOT NULL AND claimed_at < %s"
        keep_key = (
            f"CASE WHEN unique_key IS NOT NULL AND EXISTS (SELECT 1 FROM {TABLE} other "
            f"WHERE other.unique_key = {TABLE}.unique_key AND other.token IS NULL) "
            f"THEN NULL ELSE unique_key END"
        )
        sql = (
            f"UPDATE {TABLE} SET token = NULL, claimed_at = NULL, claimed_by = '', "
            f"last_error = %s, available_at = %s, unique_key = {keep_key} WHERE {where}"
        )
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.rowcount
        except IntegrityError:
            # A job with the same key was pushed meanwhile: requeue without the key.
            sql = sql.replace(keep_key, "NULL")
            with self.connection.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.rowcount

    def heartbeat(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        marks = ", ".join(["%s"] * len(claims))
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {TABLE} SET claimed_at = %s WHERE token IN ({marks})",
                [self._ts(timezone.now()), *(c.token for c in claims)],
            )
            return cursor.rowcount

    # -- settle -----------------------------------------------------------------

    def delete(self, claims: Sequence[Claim]) -> int:
        if not claims:
            return 0
        if len(claims) == 1:
            sql, params = f"DELETE FROM {TABLE} WHERE id = %s AND token = %s", [
                claims[0].id,
                claims[0].token,
            ]
        else:
            pairs = " OR ".join(["(id = %s AND token = %s)"] * len(claims))
            sql = f"DELETE FROM {TABLE} WHERE {pairs}"
            params = [value for c in claims for value in (c.id, c.token)]
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount

    def release(
        self, claim: Claim, available_at: datetime, error: str = "", *, undo_attempt: bool = False
    ) -> bool:
        attempts = "attempts - 1" if undo_attempt else "attempts"
        keep_key = (
            f"CASE WHEN unique_key IS NOT NULL AND EXISTS (SELECT 1 FROM {TABLE} other "
            f"WHERE other.unique_key = {TABLE}.unique_key AND other.token IS NULL) "
            f"THEN NULL ELSE unique_key END"
        )
        sql = (
            f"UPDATE {TABLE} SET token = NULL, claimed_at = NULL, claimed_by = '', "
            f"attempts = {attempts}, available_at = %s, last_error = %s, "
            f"unique_key = {keep_key} WHERE id = %s AND token = %s"
        )
        params = [self._ts(available_at), error, claim.id, claim.token]
        try:
            with self.connection.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.rowcount == 1
        except IntegrityError:
            # Another job with this key was pushed between the check and the write.
            with self.connection.cursor() as cursor:
                cursor.execute(sql.replace(keep_key, "NULL"), params)
                return cursor.rowcount == 1

    def fail(self, claim: Claim, error: str) -> int | None:
        now = self._ts(timezone.now())
        with transaction.atomic(using=self.database), self.connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE id = %s AND token = %s "
                f"RETURNING id, name, queue, payload, priority, unique_key, attempts, pushed_at",
                [claim.id, claim.token],
            )
            row = cursor.fetchone()
            if row is None:
                return None
            cursor.execute(
                f"INSERT INTO {FAILED_TABLE} (job_id, name, queue, payload, priority, "
                f"unique_key, attempts, pushed_at, failed_at, error) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                [*row, now, error],
            )
            return cursor.fetchone()[0]

    # -- inspect and manage -------------------------------------------------------

    def counts(self) -> dict[str, QueueCounts]:
        now = self._ts(timezone.now())
        sql = (
            f"SELECT queue, "
            f"SUM(CASE WHEN token IS NULL AND available_at <= %s THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN token IS NULL AND available_at > %s THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN token IS NOT NULL THEN 1 ELSE 0 END) "
            f"FROM {TABLE} GROUP BY queue"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [now, now])
            rows = cursor.fetchall()
        result = {
            queue: QueueCounts(pending=int(p or 0), delayed=int(d or 0), reserved=int(r or 0))
            for queue, p, d, r in rows
        }
        for queue, failed in self.failed_counts().items():
            result.setdefault(queue, QueueCounts()).failed = failed
        return dict(sorted(result.items()))

    def clear(self, queue: str | None = None) -> int:
        with self.connection.cursor() as cursor:
            if queue is None:
                cursor.execute(f"DELETE FROM {TABLE}")
            else:
                cursor.execute(f"DELETE FROM {TABLE} WHERE queue = %s", [queue])
            return cursor.rowcount

    def ping(self) -> None:
        try:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception as e:
            raise StoreUnavailable(
                f"The database {self.database!r} cannot be reached: {e}"
            ) from e

    def close(self) -> None:
        self.connection.close()
