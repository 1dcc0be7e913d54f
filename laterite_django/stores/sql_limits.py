"""The database store's limited claim: LATERITE_QUEUE_LIMITS and `@job(concurrency=...)`
enforced inside the claim itself (see flow/limits.py for what the limits mean).

Used only when a limit may apply to the claim (a limited queue among the worker's,
or a registered job with `concurrency`); otherwise the claim is the plain one of
`sql_postgres` / `sql_sqlite`, untouched.

On PostgreSQL a worker whose process registers no job with `concurrency` makes the
queue-only claim (`sql_queue_limits_postgres`: two statements, concurrency keys not
looked at, as its plain claim does not look at them); any other, the keyed one
(`sql_limits_postgres`: four). Both take the same queue locks in the same order and
count alike, so the two may race.

Why racing workers can never together exceed a limit:

- PostgreSQL: each limited queue and each concurrency key has a transaction-level
  advisory lock of its own. A claim takes jobs of a limited queue only while it
  holds that queue's lock, and jobs of a key only while it holds that key's lock;
  it counts (running jobs of the queue or key, the queue's recent starts) in a
  statement whose snapshot is taken after those locks were granted (READ
  COMMITTED: one snapshot per statement), and its own claims and starts commit
  before the locks are let go (at its commit). So every claim that took jobs of
  that queue or key before is committed and counted, and no other claim of it
  runs meanwhile: the counts can only be too high (a job finished but not yet
  deleted still counts as running), never too low. (The queue-only claim deletes
  its worker's finished jobs in the counting statement, whose snapshot still sees
  them running, and gives back exactly those it deleted: each was taken by that
  worker's previous claim, committed before, so each is in the count.) Claims of
  different queues and keys do not wait for each other. Queue locks are waited
  for, in the order of their ids (no two claims wait for each other in a circle);
  a key lock is only tried (`pg_try_advisory_xact_lock`): a key another claim
  holds is skipped this time, its jobs keep waiting. A job of neither (an
  unlimited queue, no key) needs no lock: `FOR UPDATE SKIP LOCKED` keeps two
  claims from taking it both. The statements and the commit go in one round
  trip, so a lock is held for the server's work alone.
- SQLite: one claim statement (after the deletion of finished jobs, in the same
  transaction) reads and writes under the database's single write lock, so
  claims are serialized by SQLite itself.

In both, a job held back by a limit is simply not picked: it keeps waiting, no
attempt is counted, and the claim takes the other jobs allowed (the jobs of a
key at its limit are skipped, not waited behind; on PostgreSQL among the first 1000
waiting jobs of each queue, so that a claim costs the same however many jobs of full
keys are first in line). A rate counts the starts
recorded in `laterite_flow_start` over the last period (any window of that
length), written by the same transaction as the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..flow.limits import QueueLimit
from . import sql_limits_postgres, sql_postgres, sql_queue_limits_postgres, sql_sqlite
from .base import Claim, NewJob
from .sql import COLUMNS, TABLE
from .sql_limits_postgres import NO_LIMIT, STARTS

if TYPE_CHECKING:
    from .database import DatabaseStore

__all__ = ["claim", "set_keys"]

# Candidates a claim looks at per queue (the jobs of keys at their limit are skipped
# by the scan itself, so these are only for several jobs of one key in one claim):
# CANDIDATES_PER_JOB for each job claimed, at least CANDIDATES_MIN, at most CANDIDATES.
CANDIDATES = 200
CANDIDATES_PER_JOB = 4
CANDIDATES_MIN = 50


def candidates(limit: int) -> int:
    """How many waiting jobs a claim of up to `limit` jobs looks at per queue."""
    return min(CANDIDATES, max(CANDIDATES_MIN, CANDIDATES_PER_JOB * limit))


_RUNNING_OF_KEY = (
    f"(SELECT count(*) FROM {TABLE} r WHERE r.concurrency_key = {{alias}}.concurrency_key "
    f"AND r.token IS NOT NULL)"
)


def set_keys(store: DatabaseStore, jobs: Sequence[NewJob], ids: Sequence[int | None]) -> None:
    """Write the concurrency key and limit of the pushed jobs that have one (in the
    push's transaction)."""
    for job, job_id in zip(jobs, ids, strict=True):
        if job_id is not None and job.concurrency_limit:
            store._execute(
                f"UPDATE {TABLE} SET concurrency_key = %s, concurrency_limit = %s WHERE id = %s",
                [job.concurrency_key, job.concurrency_limit, job_id],
            )


def claim(
    store: DatabaseStore, finished: Sequence[Claim], token: str, now: datetime, worker: str,
    queues: Sequence[str], limit: int, limits: dict[str, QueueLimit], keys: bool = True,
) -> list[Sequence[Any]]:
    """Delete `finished` and claim up to `limit` jobs within the limits, in one
    transaction; return the claimed rows (in `sql.COLUMNS` order). `keys`: whether
    concurrency keys may apply (a job registered here declares `concurrency`); without,
    PostgreSQL takes the queue-only claim."""
    from django.db import transaction

    if store.postgres and not keys:
        statements = sql_queue_limits_postgres.statements(
            finished, token, worker, queues, limit, limits)
        return sql_postgres.execute_pipeline(store.connection, statements)[-1]
    if store.postgres:
        rows: list[Sequence[Any]] = []
        for deleting in (finished, ()):
            statements = sql_limits_postgres.statements(
                deleting, token, worker, queues, limit, limits, candidates(limit))
            results = sql_postgres.execute_pipeline(store.connection, statements)
            rows = results[-1]
            if rows or not sql_limits_postgres.locked_keys(results):
                break
            # It locked keys but took no job of theirs: between its two snapshots another
            # claim took the jobs it had found for them. Once more at once, rather than
            # leave the worker idle until LATERITE_QUEUE_POLL while jobs wait.
        return rows
    rated = [(q, lim) for q, lim in limits.items() if lim.rate is not None]
    with transaction.atomic(using=store.database):
        if finished:
            store._hot(*store.dialect.delete(finished))
        for queue, lim in rated:
            assert lim.period is not None
            store._execute(f"DELETE FROM {STARTS} WHERE queue = %s AND started_at <= %s",
                           [queue, store._ts(now - timedelta(seconds=lim.period))])
        rows = store._execute(*_sqlite_claim(store, token, now, worker, queues, limit, limits),
                              fetch=True)[0]
        names = {lim_queue for lim_queue, _ in rated}
        for row in rows:
            if row[2] in names:
                store._execute(f"INSERT INTO {STARTS} (queue, started_at) VALUES (%s, %s)",
                               [row[2], store._ts(now)])
        return rows


def _sqlite_claim(
    store: DatabaseStore, token: str, now: datetime, worker: str, queues: Sequence[str],
    limit: int, limits: dict[str, QueueLimit],
) -> tuple[str, list[Any]]:
    """One UPDATE: the limited claim on SQLite (see the module docstring)."""
    ts = store._ts(now)
    rooms: list[str] = []
    room_params: list[Any] = []
    for rank, queue in enumerate(queues):
        lim = limits.get(queue, QueueLimit())
        parts = [str(NO_LIMIT)]
        params: list[Any] = [queue]
        if lim.concurrency is not None:
            parts.append(f"%s - (SELECT count(*) FROM {TABLE} r WHERE r.queue = %s "
                         f"AND r.token IS NOT NULL)")
            params += [lim.concurrency, queue]
        if lim.rate is not None and lim.period is not None:
            parts.append(f"%s - (SELECT count(*) FROM {STARTS} s WHERE s.queue = %s "
                         f"AND s.started_at > %s)")
            params += [lim.rate, queue, store._ts(now - timedelta(seconds=lim.period))]
        rooms.append(f"SELECT %s AS name, {rank} AS rank, MIN({', '.join(parts)}) AS room")
        room_params += params
    sql = (
        f"WITH room AS ({' UNION ALL '.join(rooms)}) "
        f"UPDATE {TABLE} SET token = %s, claimed_at = {sql_sqlite.NOW}, claimed_by = %s, "
        f"attempts = attempts + 1, claim_position = picked.position FROM ("
        f"SELECT id, row_number() OVER (ORDER BY rank, priority DESC, available_at, id) - 1 "
        f"AS position FROM (SELECT c.*, "
        f"row_number() OVER (PARTITION BY queue ORDER BY priority DESC, available_at, id) "
        f"AS nth_queue, "
        f"row_number() OVER (PARTITION BY concurrency_key "
        f"ORDER BY rank, priority DESC, available_at, id) AS nth_key, "
        f"{_RUNNING_OF_KEY.format(alias='c')} AS running "
        f"FROM (SELECT j.id, j.queue, j.priority, j.available_at, j.concurrency_key, "
        f"j.concurrency_limit, room.rank, room.room FROM {TABLE} j "
        f"JOIN room ON room.name = j.queue WHERE room.room > 0 AND j.token IS NULL "
        f"AND j.available_at <= %s AND (j.concurrency_key IS NULL OR j.concurrency_limit > "
        f"{_RUNNING_OF_KEY.format(alias='j')}) "
        f"ORDER BY room.rank, j.priority DESC, j.available_at, j.id LIMIT %s) c) "
        f"WHERE nth_queue <= room "
        f"AND (concurrency_key IS NULL OR nth_key <= concurrency_limit - running) "
        f"ORDER BY rank, priority DESC, available_at, id LIMIT %s) AS picked "
        f"WHERE {TABLE}.id = picked.id AND {TABLE}.token IS NULL "
        f"RETURNING {', '.join(COLUMNS)}"
    )
    params = [*room_params, token, worker, ts, candidates(limit), limit]
    return sql, params
