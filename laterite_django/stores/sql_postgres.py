"""The database store's PostgreSQL statements, and how the hot ones run.

Rows travel as arrays, so each statement has one shape whatever the number of
jobs, and is prepared once per connection. A claim is one statement that also
deletes the jobs finished since the previous one; a push (sql_postgres_push) and
make_due notify the `laterite` channel so idle workers wake at once.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from typing import Any

from .base import Claim
from .pg_hot import (
    Prepared,
    execute_hot,
    prepares,
    run_planned,
    run_planned_all,
)
from .pg_quiet import WAKES_QUIET
from .sql import (
    CHANNEL,
    REQUEUE_SET,
    TABLE,
    abandoned,
    returning,
)
from .sql_postgres_push import push, push_one

__all__ = [
    "CLAIM_UPDATE", "DELETE", "DELETE_FINISHED", "NOW", "PICKED", "REQUEUE_ABANDONED", "SETTINGS",
    "SETTING_VALUES", "SWEEP_BATCH", "claim", "claim_params", "delete", "due_in_order",
    "execute_hot", "execute_pipeline", "make_due", "push", "push_one", "requeue_abandoned",
    "run_claim", "run_delete", "waking",
]

Statement = tuple[str, list[Any]]

# The one clock of every lease: claims, heartbeats and the sweep's cutoff are dated by
# the server, never by a worker (hosts' clocks differ: a sweeper whose clock ran ahead
# took live claims for abandoned), as is "due" in a claim. Stable within a statement,
# so the claim's index scans still stop at the first job not yet due (clock_timestamp()
# is volatile: no index condition may use it); the time the server received the
# statement, so it is fresh even inside a caller's long transaction (now() is not).
NOW = "statement_timestamp()"
# Params: retry_after (seconds). The sweep's cutoff, by the same clock.
CUTOFF = f"{NOW} - make_interval(secs => %s)"
# Params: a delay (seconds). A job released for a retry is due that long after the
# server's now, by the same clock (never a worker's: Store.release).
AFTER_NOW = f"{NOW} + make_interval(secs => %s)"


def due_in_order(queue: str, now: str, limit: str, columns: str, lock: str = "") -> str:
    """A subquery (for a LATERAL join) of the due waiting jobs of queue `queue` (an SQL
    expression), best first: by priority, then age; at most `limit` of each priority.

    Each priority that has waiting jobs is scanned on its own (a loose index scan over
    the priorities of `laterite_job_due`: one index descent each), so the scan of the
    due jobs stops at the first job not yet due. Ordered by priority first, one scan of
    the queue's entries would step over every job delayed to later before it gives up:
    with a million jobs pushed for tomorrow, every claim read all of them.
    """
    waiting = f"FROM {TABLE} WHERE queue = {queue} AND token IS NULL"
    return (
        f"WITH RECURSIVE pr(p) AS ((SELECT priority {waiting} ORDER BY priority DESC LIMIT 1) "
        f"UNION ALL SELECT (SELECT priority {waiting} AND priority < pr.p "
        f"ORDER BY priority DESC LIMIT 1) FROM pr WHERE pr.p IS NOT NULL) "
        f"SELECT d.* FROM pr CROSS JOIN LATERAL (SELECT {columns} {waiting} "
        f"AND priority = pr.p AND available_at <= {now} "
        f"ORDER BY available_at, id LIMIT {limit}{lock}) d"
    )


# Params: queues, limit, limit. For each queue in priority order, lock its
# oldest due rows (skipping rows other workers hold); the nested loops stop as soon
# as `limit` rows are found. Each row's position in the batch is numbered over
# those few rows, in the order the worker runs them; `c` is the row's address.
_LOCKED = " FOR UPDATE SKIP LOCKED"
_PICK = (
    f"SELECT c, id, row_number() OVER (ORDER BY ord, priority DESC, available_at, id) - 1 "
    f"AS position FROM (SELECT q.ord, j.c, j.id, j.priority, j.available_at "
    f"FROM unnest(%s::varchar[]) WITH ORDINALITY AS q(name, ord) "
    f"CROSS JOIN LATERAL ("
    f"{due_in_order('q.name', NOW, '%s', 'ctid AS c, id, priority, available_at', _LOCKED)}"
    f") j ORDER BY q.ord LIMIT %s) found"
)
# The picked rows, as a CTE of a claim statement (params: _PICK's).
PICKED = f"picked AS MATERIALIZED ({_PICK})"
# Claims and deletions of finished jobs commit without waiting for the WAL flush
# (synchronous_commit off for that transaction alone). Losing one to a crash of
# the database server itself only makes the job claimable again, which is the
# at-least-once rule anyway; pushes and the failed list stay fully durable.
_ASYNC_COMMIT = "set_config('synchronous_commit', 'off', true)"
# The settings of a claim's transaction (set_config calls, in a SELECT's list): commit
# without waiting for the WAL flush (as above); plan the claim's statements once per
# connection (generic plans: planning them anew at each claim, which the server otherwise
# chooses for them, costs about as much as running them, 0.5 ms a claim); and never
# plan a scan of the whole job table: every row they read is reached through an index,
# but without the table's statistics (autovacuum off or behind, a table that was empty
# when the plan was made) the planner may take a few pages for the whole table, or
# `token IS NOT NULL` for nearly every row, and scan it all, or read every claimed row
# through a bitmap to delete 20 of them (a table vacuumed while empty, then filled, is
# costed so: a few random page reads cost more than the scan). And no JIT compilation:
# with such statistics a generic plan's cost passed jit_above_cost, and compiling it
# took 30 ms at every claim.
# Inside the caller's transaction they would last to its end: the store keeps the
# caller's values there (pg_callers_transaction).
SETTING_VALUES = {
    "synchronous_commit": "off", "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off", "enable_bitmapscan": "off", "jit": "off",
}
SETTINGS = ", ".join(f"set_config('{name}', '{value}', true)"
                     for name, value in SETTING_VALUES.items())
_SETTINGS_SQL = f"SELECT {SETTINGS}"
_SETTINGS_SELECT = _SETTINGS_SQL.encode()
# Params: token, worker; after PICKED. The picked rows are found by their address
# (a TID scan): they are locked, so they stay where they are. Joined by id instead,
# PostgreSQL hashes the picked rows and reads the whole table whenever its statistics
# say the table is small, as they do after a clear or on a fresh table; each claim
# then read every dead row a drain had left in it.
CLAIM_UPDATE = (
    f"UPDATE {TABLE} SET token = %s, claimed_at = {NOW}, "
    f"claimed_by = %s || left({_ASYNC_COMMIT}, 0) || {WAKES_QUIET}, "
    f"attempts = attempts + 1, claim_position = picked.position "
    f"FROM picked WHERE {TABLE}.ctid = ANY(ARRAY(SELECT c FROM picked)) "
    f"AND {TABLE}.ctid = picked.c {returning()}"
)
# Params: claim_params().
_CLAIM = f"WITH {PICKED} {CLAIM_UPDATE}"
# Params: ids, tokens (of finished claims, pair by pair). Their rows are reached
# through the primary key whatever the table's statistics say: joined to the list
# unnested, a table without statistics (new, emptied, autovacuum off or behind) was
# read whole and hashed at every deletion, dead rows included (1 ms for 20 jobs of
# 3,000). The one-row subquery is folded into the statement, each value given once.
DELETE_FINISHED = (
    f"DELETE FROM {TABLE} USING (SELECT %s::bigint[] AS ids, %s::varchar[] AS tokens) done "
    f"WHERE {TABLE}.id = ANY(done.ids) "
    f"AND {TABLE}.token = done.tokens[array_position(done.ids, {TABLE}.id)]"
)
DELETE = f"{DELETE_FINISHED} AND {_ASYNC_COMMIT} IS NOT NULL"
# Params: ids, tokens (finished), then claim_params().
_SETTLE_AND_CLAIM = f"WITH done AS ({DELETE}), {PICKED} {CLAIM_UPDATE}"
# Both by name (run_claim); their values' types are the server's to infer.
_CLAIM_PREPARED = Prepared(b"laterite_claim", _CLAIM, None)
_SETTLE_AND_CLAIM_PREPARED = Prepared(b"laterite_settle_and_claim", _SETTLE_AND_CLAIM, None)
_DELETE_PREPARED = Prepared(b"laterite_delete", f"{DELETE_FINISHED} RETURNING {TABLE}.id", None)
# Abandoned jobs requeued by one statement at most; DatabaseStore.requeue_abandoned
# runs it again while it requeues that many.
SWEEP_BATCH = 1000
# Params: reason, retry_after, retry_after. The abandoned jobs are found through
# laterite_job_claimed, the oldest beat first, SWEEP_BATCH at a time: with the LIMIT
# that index is the plan whatever the statistics say. As `WHERE token IS NOT NULL AND
# claimed_at < x` alone, a planner whose statistics came from an empty table read the
# whole table at every sweep. The rows are then found by their address; a row that
# changed in between (beat, settled, requeued by another sweep) is skipped.
REQUEUE_ABANDONED = (
    f"{REQUEUE_SET}WHERE ctid = ANY(ARRAY(SELECT ctid FROM {TABLE} WHERE {abandoned(CUTOFF)} "
    f"ORDER BY claimed_at LIMIT {SWEEP_BATCH})) AND {abandoned(CUTOFF)}"
)
# Params: ids, channel. Due at the server's now (the clock a claim compares with);
# jobs already due keep their place in line.
_MAKE_DUE = (
    f"WITH due AS (UPDATE {TABLE} SET available_at = LEAST(available_at, {NOW}) "
    f"WHERE token IS NULL AND id = ANY(%s::bigint[]) RETURNING id, queue), "
    f"notified AS (SELECT pg_notify(%s, queue) FROM (SELECT DISTINCT queue FROM due) q) "
    f"SELECT id FROM due WHERE (SELECT count(*) FROM notified) >= 0"
)


def claim_params(token: str, worker: str, queues: Sequence[str], limit: int) -> list[Any]:
    """The parameters of PICKED, then CLAIM_UPDATE's, in the order they appear."""
    return [list(queues), limit, limit, token, worker]


def claim(
    finished: Sequence[Claim], token: str, now: Any, worker: str, queues: Sequence[str],
    limit: int,
) -> list[Statement]:
    """One statement: delete `finished` (claims still held), claim up to `limit` jobs.
    `now` is not read: the server's clock (NOW) dates the claim and says what is due."""
    params = claim_params(token, worker, queues, limit)
    if not finished:
        return [(_CLAIM, params)]
    return [(_SETTLE_AND_CLAIM, [[c.id for c in finished], [c.token for c in finished], *params])]


def run_claim(
    connection: Any, finished: Sequence[Claim], token: str, worker: str,
    queues: Sequence[str], limit: int,
) -> list[tuple] | None:
    """What `claim`'s statement returns, run under the claim's SETTINGS
    (`_under_settings`); None inside the caller's transaction: run `claim`'s there."""
    params = claim_params(token, worker, queues, limit)
    if not finished:
        return _under_settings(connection, _CLAIM_PREPARED, params)
    return _under_settings(connection, _SETTLE_AND_CLAIM_PREPARED,
                           [[c.id for c in finished], [c.token for c in finished], *params])


def run_delete(connection: Any, claims: Sequence[Claim]) -> int | None:
    """How many of `claims` were deleted (finished: their rows go), under the claim's
    SETTINGS (`_under_settings`); None inside the caller's transaction: run `delete`'s."""
    rows = _under_settings(connection, _DELETE_PREPARED, delete(claims)[1])
    return None if rows is None else len(rows)


def _under_settings(connection: Any, statement: Prepared, params: list[Any]
                    ) -> list[tuple] | None:
    """The rows of `statement`, run after the claim's SETTINGS in one transaction and
    one round trip: by name, its plan made once per connection (`pg_hot.run_planned`),
    or else (behind a pooler, nothing prepared) unprepared, both in one pipeline. None
    inside the caller's transaction, which the settings would outlast."""
    rows = run_planned(connection, _SETTINGS_SELECT, statement, params)
    if rows is not None:
        return rows
    connection.ensure_connection()
    if connection.in_atomic_block or not connection.connection.autocommit:
        return None
    return execute_pipeline(connection, [(_SETTINGS_SQL, []), (statement.sql, params)])[-1]


def delete(claims: Sequence[Claim]) -> Statement:
    return DELETE, [[c.id for c in claims], [c.token for c in claims]]


def make_due(ids: Sequence[int], now: Any) -> list[Statement]:
    """Make waiting or delayed `ids` due and wake the workers; returns one row per job.

    `now` is not read: the server's clock (NOW) says when, as it does for the claim."""
    return [(_MAKE_DUE, [list(ids), CHANNEL])]


def requeue_abandoned(reason: str, retry_after: float) -> Statement:
    """Requeue up to SWEEP_BATCH jobs whose claims were not refreshed for `retry_after`
    seconds by the server's clock, and wake the workers of their queues."""
    return waking(REQUEUE_ABANDONED, [reason, retry_after, retry_after])


def waking(statement: str, params: list[Any]) -> Statement:
    """An UPDATE that puts jobs back in line, made to notify their queues as a push does,
    so idle workers (which wait for a notification) see them at once."""
    return (
        f"WITH back AS ({statement} RETURNING queue) "
        f"SELECT pg_notify(%s, queue) FROM back",
        [*params, CHANNEL],
    )


def execute_pipeline(connection: Any, statements: Sequence[Statement]) -> list[list]:
    """Run statements of the hot path (each returning rows) in one transaction, in
    order; return the rows of each.

    Outside a transaction they go in one round trip: by name through libpq where they
    can (`pg_hot.run_planned_all`, each prepared once per connection under a name
    made from its text), else in psycopg's pipeline mode (BEGIN, the statements and
    COMMIT sent together, one Sync). So a lock a statement takes
    is held for the server's work alone, never over a round trip. Each statement
    still has a snapshot of its own (READ COMMITTED). Inside the caller's
    transaction they run one by one in it.
    """
    import psycopg
    from django.db import transaction

    found = run_planned_all(connection, [(_named(sql), params) for sql, params in statements])
    if found is not None:
        return found
    connection.ensure_connection()
    raw = connection.connection
    if connection.in_atomic_block or not raw.autocommit:
        with transaction.atomic(using=connection.alias):
            return [execute_hot(connection, sql, params, fetch=True)[0]
                    for sql, params in statements]
    with connection.wrap_database_errors:
        prepare = prepares(connection, raw)
        with psycopg.Cursor(raw) as control:
            cursors = [psycopg.Cursor(raw) for _ in statements]
            try:
                with raw.pipeline():
                    control.execute("BEGIN")
                    for cursor, (sql, params) in zip(cursors, statements, strict=True):
                        cursor.execute(sql, params, prepare=prepare)
                    control.execute("COMMIT")
                return [cursor.fetchall() for cursor in cursors]
            except BaseException:
                # A failed statement leaves the transaction open, aborted: end it (on a
                # broken connection there is none left to end).
                status = psycopg.pq.TransactionStatus
                if raw.info.transaction_status in (status.INTRANS, status.INERROR):
                    with contextlib.suppress(Exception):
                        raw.rollback()
                raise
            finally:
                for cursor in cursors:
                    cursor.close()


# The statements `execute_pipeline` ran by name, by their text.
_NAMED: dict[str, Prepared] = {}


def _named(sql: str) -> Prepared:
    """`sql` as a statement prepared by a name made from its text (its values' types
    inferred by the server: each placeholder's is plain from where it stands)."""
    statement = _NAMED.get(sql)
    if statement is None:
        digest = hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
        statement = _NAMED[sql] = Prepared(f"laterite_{digest}".encode(), sql, None)
    return statement
