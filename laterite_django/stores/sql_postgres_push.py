"""The database store's PostgreSQL push: one job by name through libpq, or any number
as arrays, each notifying the `laterite` channel when a worker waits.

A push notifies only when a worker waits. A waiting worker holds the advisory lock
IDLE_LOCK, shared; a push tries to take it, exclusive, for an instant
(`MUST_NOTIFY`): taken, no worker waits and the push sends no NOTIFY (whose queue
serializes the commits of the transactions that notify); not taken, it notifies.
No wake-up is lost: a push holds PUSH_LOCK, shared, until its commit, and a worker
that takes IDLE_LOCK then waits only once it could take PUSH_LOCK, exclusive, for an
instant (no push that looked before it took IDLE_LOCK is still uncommitted), and
after one more claim (database_wait). Pushes never wait for each other: the
shared locks do not conflict, and two pushes trying IDLE_LOCK at the same instant
both notify.

Due times are the server's (the clock a claim compares them with): a job due at once
or after a delay (NewJob.delay) is sent without its due time but with the delay,
added to `statement_timestamp()`; only a job pushed for a moment (push_at) carries its
own. `pushed_at` stays the pusher's, the moment its retry window (`retry_until`) is
counted from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import NewJob
from .pg_hot import Prepared, run_hot, run_prepared
from .pg_texts import as_texts
from .sql import CHANNEL, IDLE_LOCK, INSERT_COLUMNS, PUSH_LOCK, TABLE

__all__ = ["MUST_NOTIFY", "push", "push_one"]

Statement = tuple[str, list[Any]]

# Whether a push must notify (see the module docstring). A CASE, so that the locks are
# tried in this order, and the instant lock let go only if taken.
MUST_NOTIFY = (
    f"CASE WHEN NOT pg_try_advisory_xact_lock_shared({PUSH_LOCK}) THEN true "
    f"WHEN pg_try_advisory_lock({IDLE_LOCK}) THEN NOT pg_advisory_unlock({IDLE_LOCK}) "
    f"ELSE true END"
)
# A job with a unique key is not inserted when a waiting job has that key: ON CONFLICT
# names that index (laterite_job_unique_waiting), so that any other conflict, an id
# already taken (a sequence behind its table after a restore), raises rather than
# drop the job as a duplicate. A push without keys has no ON CONFLICT at all: its rows
# cannot conflict on the key, and a speculative insertion (a probe of each unique
# index, one more WAL record) costs a lone push about 5% of its time.
_ON_KEY = (" ON CONFLICT (unique_key) WHERE token IS NULL AND unique_key IS NOT NULL "
           "DO NOTHING")


def _due(available_at: str, delay: str) -> str:
    """A job's due time from its available_at and delay (SQL; one of them is NULL): the
    moment given, or the server's now plus the delay in seconds (COALESCE reads the
    second only when the first is NULL)."""
    return f"COALESCE({available_at}, statement_timestamp() + make_interval(secs => {delay}))"


# One pushed row (params: name, queue, payload, priority, pushed_at, available_at, delay,
# retry_until, unique_key).
_ROW = f"(%s, %s, %s, %s, %s, {_due('%s', '%s')}, 0, %s, %s, '', '', 0)"


def _push_sql(on_key: str) -> str:
    """The push of any number of jobs (params: one array per column, then the channel)."""
    return (
        f"WITH ins AS (INSERT INTO {TABLE} ({INSERT_COLUMNS}) "
        f"SELECT n, q, p, pr, pa, {_due('aa', 'd')}, 0, ru, uk, '', '', 0 FROM unnest("
        f"%s::varchar[], %s::varchar[], %s::text[], %s::int2[], %s::timestamptz[], "
        f"%s::timestamptz[], %s::float8[], %s::timestamptz[], %s::varchar[]) "
        f"AS t(n, q, p, pr, pa, aa, d, ru, uk){on_key} RETURNING id, unique_key, queue), "
        f"notified AS (SELECT pg_notify(%s, queue) FROM (SELECT DISTINCT queue FROM ins) q "
        f"WHERE (SELECT {MUST_NOTIFY})) "
        f"SELECT id, unique_key FROM ins WHERE (SELECT count(*) FROM notified) >= 0"
    )


def _push_one_sql(on_key: str) -> str:
    """The push of one job (params: one row). No CTE: the RETURNING list itself
    notifies (a row not inserted, a duplicate of a waiting job's unique key, returns
    nothing and notifies no one)."""
    return (f"INSERT INTO {TABLE} ({INSERT_COLUMNS}) VALUES {_ROW}{on_key} RETURNING id, "
            f"CASE WHEN {MUST_NOTIFY} THEN pg_notify('{CHANNEL}', queue) END")


_PUSH, _PUSH_KEYED = _push_sql(""), _push_sql(_ON_KEY)
_PUSH_ONE, _PUSH_ONE_KEYED = _push_one_sql(""), _push_one_sql(_ON_KEY)


def push(jobs: Sequence[NewJob], ts: Any) -> list[Statement]:
    """Insert `jobs` (any number) and notify their queues; returns (id, unique_key) rows.

    PostgreSQL delivers the notification when the pushing transaction commits.
    """
    keyed = any(job.unique_key is not None for job in jobs)
    return [(_PUSH_KEYED if keyed else _PUSH, [
        [job.name for job in jobs],
        [job.queue for job in jobs],
        [job.payload for job in jobs],
        [job.priority for job in jobs],
        [job.pushed_at for job in jobs],
        [None if job.delay is not None else job.available_at for job in jobs],
        [job.delay for job in jobs],
        [job.retry_until for job in jobs],
        [job.unique_key for job in jobs],
        CHANNEL,
    ])]


# _PUSH_ONE and _PUSH_ONE_KEYED by name, their values as text, the three times in
# binary (pg_texts): varchar, varchar, text, int2, two timestamptz, float8, timestamptz,
# varchar (their type OIDs), and their formats (0 text, 1 binary).
_TYPES = (1043, 1043, 25, 21, 1184, 1184, 701, 1184, 1043)
_FORMATS = (0, 0, 0, 0, 1, 1, 0, 1, 0)
_PUSH_PREPARED = Prepared(b"laterite_push_one", _PUSH_ONE, _TYPES)
_PUSH_KEYED_PREPARED = Prepared(b"laterite_push_one_keyed", _PUSH_ONE_KEYED, _TYPES)


def push_one(connection: Any, job: NewJob, ts: Any) -> int | None:
    """Insert one job and notify its queue; its id, or None for a duplicate of a waiting
    job's unique key."""
    delay = job.delay
    params = [job.name, job.queue, job.payload, job.priority, job.pushed_at,
              None if delay is not None else job.available_at, delay, job.retry_until,
              job.unique_key]
    texts = as_texts(params, binary_times=True)
    prepared = _PUSH_PREPARED if job.unique_key is None else _PUSH_KEYED_PREPARED
    if texts is None:
        result = run_hot(connection, prepared.sql, params).pgresult
    else:
        result = run_prepared(connection, prepared, texts, params, _FORMATS)
    return int(result.get_value(0, 0)) if result.ntuples else None
