"""Every SQLite statement of the database store (also used for any database but
PostgreSQL), named as the store calls it.

SQLite takes its write lock for each statement, so claims are serialized and
need no row locks. Values travel one bound parameter each, so big pushes are
cut into chunks under SQLite's bound-parameter limit (32,766).

SQLite has no LISTEN/NOTIFY; the waiting worker's wake-up is in wait.py (`Waiter`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ...core.limits import QueueLimit
from ...core.values import Claim, NewJob
from .sql import (
    COLUMNS,
    INSERT_COLUMNS,
    NO_LIMIT,
    REQUEUE_SET,
    ROW,
    STARTS,
    TABLE,
    WAITING_OF_BATCH,
    abandoned,
    candidates,
    execute,
    stored_fair_key,
)

__all__ = [
    "DROP_BATCH_FIND", "INSERT_DEBOUNCED", "LIMITED_CLAIM_PRUNE", "LIMITED_CLAIM_START", "NOW",
    "REPLACE_DEBOUNCED", "SWEEP_BATCH", "claim", "claim_update", "delete", "delete_marked",
    "execute_prepared", "insert_ends", "limited_claim", "make_due", "push", "push_debounced",
    "push_one", "requeue_abandoned", "waking",
]

Statement = tuple[str, list[Any]]

# Jobs per INSERT (8 parameters each, 9 with a fair key) and ids per UPDATE.
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
    # A job of a fair queue keeps its key ("" for none) for the counts per key.
    fair = any(job.fair_cost is not None for job in jobs)
    columns, row = (f"{INSERT_COLUMNS}, fair_key", f"{ROW[:-1]}, %s)") if fair else (
        INSERT_COLUMNS, ROW)
    for chunk in _chunks(jobs):
        params: list[Any] = []
        for job in chunk:
            params += [
                job.name, job.queue, job.payload, job.priority, ts(job.pushed_at),
                ts(job.available_at), ts(job.retry_until), job.unique_key,
            ]
            if fair:
                params.append(stored_fair_key(job))
        statements.append((
            f"INSERT INTO {TABLE} ({columns}) VALUES {', '.join([row] * len(chunk))} "
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


# A debounced push (Store.push_debounced) on SQLite: the UPDATE of the waiting job that
# holds the key, then, if it found none, the INSERT of a new job, run in one
# transaction (DatabaseStore.push_debounced). The UPDATE takes the database's write
# lock as it starts, whether it changes a row or not, and the transaction keeps it to
# its commit: no other push can insert a job with that key, nor a claim take the one
# found, between the two, so exactly one waiting job holds a key however many
# processes push it. (An upsert would do it in one statement, but RETURNING cannot
# tell an inserted row from an updated one.) Times are this host's clock's, as every
# due time on SQLite: the job's now plus the seconds given.
# Params: name, queue, payload, priority, retry_until, concurrency_key,
# concurrency_limit, debounce_until, available_at, available_at, unique_key.
REPLACE_DEBOUNCED = (
    f"UPDATE {TABLE} SET name = %s, queue = %s, payload = %s, priority = %s, "
    f"retry_until = %s, concurrency_key = %s, concurrency_limit = %s, "
    f"debounce_until = COALESCE(debounce_until, %s), "
    f"available_at = MIN(%s, COALESCE(debounce_until, %s)) "
    f"WHERE unique_key = %s AND token IS NULL RETURNING id"
)
# Params: a ROW's, then debounce_until, concurrency_key, concurrency_limit.
INSERT_DEBOUNCED = (
    f"INSERT INTO {TABLE} ({INSERT_COLUMNS}, debounce_until, concurrency_key, "
    f"concurrency_limit) VALUES {ROW[:-1]}, %s, %s, %s) RETURNING id"
)


def push_debounced(job: NewJob, ts: Callable[[Any], Any]) -> tuple[Statement, Statement]:
    """The replacement, then the insertion, of debounced job `job` (REPLACE_DEBOUNCED,
    INSERT_DEBOUNCED): each returns the job's id if it stored it."""
    assert job.debounce is not None
    due = ts(job.pushed_at + timedelta(seconds=job.debounce))
    until = (None if job.debounce_max is None
             else ts(job.pushed_at + timedelta(seconds=job.debounce_max)))
    return (
        (REPLACE_DEBOUNCED, [
            job.name, job.queue, job.payload, job.priority, ts(job.retry_until),
            job.concurrency_key, job.concurrency_limit, until, due, due, job.unique_key,
        ]),
        (INSERT_DEBOUNCED, [
            job.name, job.queue, job.payload, job.priority, ts(job.pushed_at), due,
            ts(job.retry_until), job.unique_key, until, job.concurrency_key,
            job.concurrency_limit,
        ]),
    )


def claim_update(picked: str, where: str = "") -> str:
    """The claim's UPDATE, the one every claim composes (params: token, worker, then
    `picked`'s): the rows of `picked` (a SELECT of id and position, the row's place in
    the batch) become claimed by SQLite's clock, with `where`'s conditions added; it
    returns `sql.COLUMNS`."""
    return (
        f"UPDATE {TABLE} SET token = %s, claimed_at = {NOW}, claimed_by = %s, "
        f"attempts = attempts + 1, claim_position = picked.position FROM ({picked}) AS picked "
        f"WHERE {TABLE}.id = picked.id{where} RETURNING {', '.join(COLUMNS)}"
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
    sql = claim_update(
        f"SELECT id, row_number() OVER (ORDER BY rank, priority DESC, available_at, id) - 1 "
        f"AS position FROM (SELECT id, priority, available_at, rank FROM ({per_queue}) "
        f"ORDER BY rank, priority DESC, available_at, id LIMIT %s)")
    params = [token, worker, *[v for queue in queues for v in (queue, now, limit)], limit]
    return [*([delete(finished)] if finished else []), (sql, params)]


def delete(claims: Sequence[Claim]) -> Statement:
    pairs = " OR ".join(["(id = %s AND token = %s)"] * len(claims))
    return (
        f"DELETE FROM {TABLE} WHERE {pairs}",
        [value for c in claims for value in (c.id, c.token)],
    )


def delete_marked(claims: Sequence[Claim]) -> Statement:
    """Delete `claims` (held), returning the ids deleted (DatabaseStore._delete_marked)."""
    pairs = ", ".join(["(%s, %s)"] * len(claims))
    return (
        f"DELETE FROM {TABLE} WHERE (id, token) IN (VALUES {pairs}) RETURNING id",
        [v for c in claims for v in (c.id, c.token)],
    )


# Params: a batch's payload pattern. Its waiting jobs (Store.drop_batch; SQLite's
# single writer keeps claims out until the commit).
DROP_BATCH_FIND = WAITING_OF_BATCH


def insert_ends(ends: int) -> str:
    """Params: batch and position of each of `ends` ends. Those not counted yet inserted
    and returned (workflows.count_ends counts them)."""
    values = ", ".join(["(%s, %s)"] * ends)
    return (f"INSERT INTO laterite_batch_end (batch_id, position) VALUES {values} "
            "ON CONFLICT DO NOTHING RETURNING batch_id, position")


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


# The claim and push path runs as any statement does (sqlite3 keeps a cache of
# prepared statements).
execute_prepared = execute


_RUNNING_OF_KEY = (
    f"(SELECT count(*) FROM {TABLE} r WHERE r.concurrency_key = {{alias}}.concurrency_key "
    f"AND r.token IS NOT NULL)"
)
# Params: queue, the oldest start to keep (LIMITED_CLAIM_PRUNE); queue, now
# (LIMITED_CLAIM_START).
LIMITED_CLAIM_PRUNE = f"DELETE FROM {STARTS} WHERE queue = %s AND started_at <= %s"
LIMITED_CLAIM_START = f"INSERT INTO {STARTS} (queue, started_at) VALUES (%s, %s)"


def limited_claim(
    ts: Callable[[Any], Any], token: str, now: datetime, worker: str, queues: Sequence[str],
    limit: int, limits: dict[str, QueueLimit],
) -> Statement:
    """One UPDATE: the limited claim on SQLite, read and written under the database's
    single write lock (see DatabaseStore._claim_limited)."""
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
            params += [lim.rate, queue, ts(now - timedelta(seconds=lim.period))]
        rooms.append(f"SELECT %s AS name, {rank} AS rank, MIN({', '.join(parts)}) AS room")
        room_params += params
    sql = f"WITH room AS ({' UNION ALL '.join(rooms)}) " + claim_update(
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
        f"ORDER BY rank, priority DESC, available_at, id LIMIT %s",
        f" AND {TABLE}.token IS NULL")
    return sql, [*room_params, token, worker, ts(now), candidates(limit), limit]
