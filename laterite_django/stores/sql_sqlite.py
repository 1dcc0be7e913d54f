"""The database store's SQLite statements (also used for any database but PostgreSQL).

SQLite takes its write lock for each statement, so claims are serialized and
need no row locks. Values travel one bound parameter each, so big pushes are
cut into chunks under SQLite's bound-parameter limit (32,766).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .base import Claim, NewJob
from .sql import COLUMNS, INSERT_COLUMNS, ROW, TABLE, execute

__all__ = ["claim", "delete", "execute_hot", "make_due", "push", "waking"]

Statement = tuple[str, list[Any]]

# Jobs per INSERT (8 parameters each) and ids per UPDATE.
_CHUNK = 2000


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[start : start + _CHUNK] for start in range(0, len(items), _CHUNK)]


def waking(statement: str, params: list[Any]) -> Statement:
    """The statement as it is: nothing waits to be woken on SQLite."""
    return statement, params


def push(jobs: Sequence[NewJob], ts: Callable[[Any], Any]) -> list[Statement]:
    """Insert `jobs`, one statement per chunk; each returns (id, unique_key) rows."""
    statements = []
    for chunk in _chunks(jobs):
        params: list[Any] = []
        for job in chunk:
            params += [
                job.name, job.queue, job.payload, job.priority, ts(job.pushed_at),
                ts(job.available_at), ts(job.retry_until), job.unique_key,
            ]
        statements.append((
            f"INSERT INTO {TABLE} ({INSERT_COLUMNS}) VALUES {', '.join([ROW] * len(chunk))} "
            f"ON CONFLICT DO NOTHING RETURNING id, unique_key",
            params,
        ))
    return statements


def claim(
    finished: Sequence[Claim], token: str, now: Any, worker: str, queues: Sequence[str],
    limit: int,
) -> list[Statement]:
    """Delete `finished` (claims still held), then claim up to `limit` jobs: the first
    listed queue first, then by priority and age, each numbered by its place in the batch.
    """
    rank = " ".join(f"WHEN %s THEN {i}" for i in range(len(queues)))
    marks = ", ".join(["%s"] * len(queues))
    sql = (
        f"UPDATE {TABLE} SET token = %s, claimed_at = %s, claimed_by = %s, "
        f"attempts = attempts + 1, claim_position = picked.position FROM ("
        f"SELECT id, row_number() OVER (ORDER BY rank, priority DESC, available_at, id) - 1 "
        f"AS position FROM (SELECT id, priority, available_at, CASE queue {rank} END AS rank "
        f"FROM {TABLE} WHERE queue IN ({marks}) AND token IS NULL AND available_at <= %s "
        f"ORDER BY rank, priority DESC, available_at, id LIMIT %s)) AS picked "
        f"WHERE {TABLE}.id = picked.id RETURNING {', '.join(COLUMNS)}"
    )
    params = [token, now, worker, *queues, *queues, now, limit]
    return [*([delete(finished)] if finished else []), (sql, params)]


def delete(claims: Sequence[Claim]) -> Statement:
    pairs = " OR ".join(["(id = %s AND token = %s)"] * len(claims))
    return (
        f"DELETE FROM {TABLE} WHERE {pairs}",
        [value for c in claims for value in (c.id, c.token)],
    )


def make_due(ids: Sequence[int], now: Any) -> list[Statement]:
    """Make waiting or delayed `ids` due (jobs already due keep their place in line);
    each statement returns one row per job. SQLite cannot wake the workers: they poll."""
    return [
        (
            f"UPDATE {TABLE} SET available_at = MIN(available_at, %s) "
            f"WHERE token IS NULL AND id IN ({', '.join(['%s'] * len(chunk))}) RETURNING id",
            [now, *chunk],
        )
        for chunk in _chunks(ids)
    ]


# The hot path runs as any statement does (sqlite3 keeps a cache of prepared statements).
execute_hot = execute
