"""The database store's limited claim: LATERITE_QUEUE_LIMITS and `@job(concurrency=...)`
enforced inside the claim itself (see flow/limits.py for what the limits mean).

Used only when a limit may apply to the claim (a limited queue among the worker's,
or a registered job with `concurrency`); otherwise the claim is the plain one of
`sql_postgres` / `sql_sqlite`, untouched.

Why racing workers can never together exceed a limit:

- PostgreSQL: the claim transaction first takes one transaction-level advisory
  lock (`pg_advisory_xact_lock`), so limited claims run one after another; the
  claim statement that follows takes its snapshot after the lock was granted
  (READ COMMITTED: one snapshot per statement), so it counts every claim that
  committed before, and its own claims commit before the lock is released. The
  counts can only be too high (a job finished but not yet deleted still counts
  as running), never too low.
- SQLite: one claim statement (after the deletion of finished jobs, in the same
  transaction) reads and writes under the database's single write lock, so
  claims are serialized by SQLite itself.

In both, a job held back by a limit is simply not picked: it keeps waiting, no
attempt is counted, and the claim takes the other jobs allowed (the jobs of a
key at its limit are skipped, not waited behind). A rate counts the starts
recorded in `laterite_flow_start` over the last period (any window of that
length), written by the same transaction as the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..flow.limits import QueueLimit
from .base import Claim, NewJob
from .sql import COLUMNS, TABLE

if TYPE_CHECKING:
    from .database import DatabaseStore

__all__ = ["claim", "set_keys"]

STARTS = "laterite_flow_start"
# The advisory lock every limited claim on PostgreSQL takes ('lat-flow').
LOCK = 0x6C61742D666C6F77
# Room that stands for "no limit".
NO_LIMIT = 1_000_000
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
# Claims and deletions commit without waiting for the WAL flush (see sql_postgres).
_ASYNC_COMMIT = "set_config('synchronous_commit', 'off', true)"

# Params: queues, concurrency, rate, period (arrays, NULL for none), NO_LIMIT, NO_LIMIT,
# now, now, CANDIDATES, limit, token, now, worker, now.
_PG_CLAIM = (
    f"WITH q AS (SELECT * FROM unnest(%s::varchar[], %s::int[], %s::int[], %s::float8[]) "
    f"WITH ORDINALITY AS q(name, conc, rate, period, ord)), "
    # Materialized: each count runs once per claim, and only for a queue with that limit.
    f"room AS MATERIALIZED (SELECT q.name, q.ord, LEAST("
    f"CASE WHEN q.conc IS NULL THEN %s ELSE q.conc - (SELECT count(*) FROM {TABLE} r "
    f"WHERE r.queue = q.name AND r.token IS NOT NULL) END, "
    f"CASE WHEN q.rate IS NULL THEN %s ELSE q.rate - (SELECT count(*) FROM {STARTS} s "
    f"WHERE s.queue = q.name AND s.started_at > %s::timestamptz "
    f"- make_interval(secs => q.period)) END) AS room "
    f"FROM q), "
    # The running jobs per key, counted once (the partial index of claimed keyed jobs).
    f"running AS (SELECT concurrency_key AS key, count(*) AS n FROM {TABLE} "
    f"WHERE token IS NOT NULL AND concurrency_key IS NOT NULL GROUP BY concurrency_key), "
    f"cand AS (SELECT room.ord, j.* FROM room CROSS JOIN LATERAL ("
    f"SELECT id, priority, available_at, concurrency_key, concurrency_limit FROM {TABLE} "
    f"WHERE queue = room.name AND token IS NULL AND available_at <= %s "
    f"AND (concurrency_key IS NULL OR concurrency_limit > COALESCE("
    f"(SELECT n FROM running WHERE running.key = {TABLE}.concurrency_key), 0)) "
    f"ORDER BY priority DESC, available_at, id LIMIT LEAST(room.room, %s)) j "
    f"WHERE room.room > 0), "
    f"ranked AS (SELECT cand.*, row_number() OVER (PARTITION BY concurrency_key "
    f"ORDER BY ord, priority DESC, available_at, id) AS nth, "
    f"COALESCE(running.n, 0) AS running FROM cand "
    f"LEFT JOIN running ON running.key = cand.concurrency_key), "
    f"picked AS (SELECT id, row_number() OVER (ORDER BY ord, priority DESC, available_at, id) "
    f"- 1 AS position FROM ranked "
    f"WHERE concurrency_key IS NULL OR nth <= concurrency_limit - running "
    f"ORDER BY ord, priority DESC, available_at, id LIMIT %s), "
    f"claimed AS (UPDATE {TABLE} SET token = %s, claimed_at = %s, "
    f"claimed_by = %s || left({_ASYNC_COMMIT}, 0), "
    f"attempts = attempts + 1, claim_position = picked.position FROM picked "
    f"WHERE {TABLE}.id = picked.id AND {TABLE}.token IS NULL "
    f"RETURNING {', '.join(f'{TABLE}.{c}' for c in COLUMNS)}), "
    f"started AS (INSERT INTO {STARTS} (queue, started_at) SELECT c.queue, %s FROM claimed c "
    f"JOIN q ON q.name = c.queue WHERE q.rate IS NOT NULL RETURNING 1) "
    f"SELECT {', '.join(COLUMNS)} FROM claimed WHERE (SELECT count(*) FROM started) >= 0"
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
    queues: Sequence[str], limit: int, limits: dict[str, QueueLimit],
) -> list[Sequence[Any]]:
    """Delete `finished` and claim up to `limit` jobs within the limits, in one
    transaction; return the claimed rows (in `sql.COLUMNS` order)."""
    from django.db import transaction

    rated = [(q, lim) for q, lim in limits.items() if lim.rate is not None]
    with transaction.atomic(using=store.database):
        if store.postgres and finished:
            # The finished jobs leave, then the lock: one round trip.
            delete, delete_params = store.dialect.delete(finished)
            store._hot(f"WITH done AS ({delete} RETURNING 1) SELECT pg_advisory_xact_lock(%s), "
                       f"(SELECT count(*) FROM done)", [*delete_params, LOCK], fetch=True)
        elif store.postgres:
            store._hot("SELECT pg_advisory_xact_lock(%s)", [LOCK], fetch=True)
        elif finished:
            store._hot(*store.dialect.delete(finished))
        for queue, lim in rated:
            assert lim.period is not None
            store._execute(f"DELETE FROM {STARTS} WHERE queue = %s AND started_at <= %s",
                           [queue, store._ts(now - timedelta(seconds=lim.period))])
        if store.postgres:
            plain = [limits.get(q, QueueLimit()) for q in queues]
            ts = store._ts(now)
            params = [
                list(queues), [lim.concurrency for lim in plain], [lim.rate for lim in plain],
                [lim.period for lim in plain], NO_LIMIT, NO_LIMIT, ts, ts, candidates(limit), limit,
                token, ts, worker, ts,
            ]
            return store._hot(_PG_CLAIM, params, fetch=True)[0]
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
        f"UPDATE {TABLE} SET token = %s, claimed_at = %s, claimed_by = %s, "
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
    params = [*room_params, token, ts, worker, ts, candidates(limit), limit]
    return sql, params
