"""A batch's counts, moved in the database for every store, and its callbacks pushed
by the transaction that moves them: the one that deletes the job on the database
store, the one that records its end on Redis (see stores/redis/workflows.py). One
exception, PostgreSQL's batch drain: the claim that deletes and counts the finished
jobs commits on its own, and the callbacks of a batch it took to 0 are pushed right
after by `finish_settled` (or by the sweep, if the worker died in between).

Each job's end is counted once: its `BatchEnd` row (batch, position) is inserted with
ON CONFLICT DO NOTHING, and only the rows inserted are counted, so an end told twice
(a crash between the record and its removal on Redis) or a job retried from the
failed list after it was counted moves nothing (PostgreSQL's batch drain inserts
none: a row is deleted once, and it skips the positions that have one). The UPDATE
of the batch's row locks it, so concurrent ends are counted one after another and
exactly one of them takes `pending` to 0 (or counts the first failure): that one
pushes the callbacks, or leaves the batch unfinished for `finish_settled`, which
marks it finished in the transaction that pushes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.utils import timezone

from ..crash_points import crash_point
from .calls import link_job

if TYPE_CHECKING:
    from ..stores import NewJob
    from .ending import End

__all__ = ["count_ends", "finish_settled", "finished_jobs"]

_UPDATE = (
    "UPDATE laterite_batch SET pending = pending - %s, failed = failed + %s "
    "WHERE id = %s AND finished_at IS NULL "
    "RETURNING pending, failed, allow_failures, caught_at, cancelled_at, "
    "then_call, catch_call, finally_call"
)


# PostgreSQL, params: batches, positions, failed (one per end, sorted). The ends
# inserted (each once), counted per batch in the statement: (batch, ended, failed).
_INSERT_COUNTED = (
    "WITH e AS (SELECT DISTINCT ON (b, p) b, p, f FROM unnest(%s::bigint[], %s::int[], "
    "%s::bool[]) AS e(b, p, f) ORDER BY b, p, f DESC), "
    "ins AS (INSERT INTO laterite_batch_end (batch_id, position) SELECT b, p FROM e "
    "ORDER BY b, p ON CONFLICT DO NOTHING RETURNING batch_id, position) "
    "SELECT ins.batch_id, count(*), count(*) FILTER (WHERE e.f) FROM ins "
    "JOIN e ON e.b = ins.batch_id AND e.p = ins.position GROUP BY ins.batch_id "
    "ORDER BY ins.batch_id"
)


def count_ends(using: str, ends: Sequence[End], push: Callable[[list[NewJob]], Any]) -> None:
    """Count `ends` on their batches and `push` the callbacks they set off. Runs in the
    caller's transaction on database `using`."""
    if not ends:
        return
    # One order for every transaction (rows inserted, then batch rows updated): two
    # that count the same ends (a Redis end told twice) wait for each other, never
    # for each other's next row.
    ends = sorted(ends, key=lambda end: (end.batch, end.position))
    counted: dict[int, list[int]] = {}
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # counted by the statement itself
            cursor.execute(_INSERT_COUNTED, [[end.batch for end in ends],
                                             [end.position for end in ends],
                                             [end.failed for end in ends]])
            for batch, ended, failed in cursor.fetchall():
                counted[int(batch)] = [int(ended), int(failed)]
        else:
            new = set()
            for start in range(0, len(ends), 5000):  # SQLite's limit of parameters
                part = ends[start:start + 5000]
                values = ", ".join(["(%s, %s)"] * len(part))
                cursor.execute(
                    f"INSERT INTO laterite_batch_end (batch_id, position) VALUES {values} "
                    "ON CONFLICT DO NOTHING RETURNING batch_id, position",
                    [v for end in part for v in (end.batch, end.position)],
                )
                new |= {(int(b), int(p)) for b, p in cursor.fetchall()}
            for end in ends:
                if (end.batch, end.position) in new:
                    new.discard((end.batch, end.position))  # an end listed twice counts once
                    count = counted.setdefault(end.batch, [0, 0])
                    count[0] += 1
                    count[1] += end.failed
        jobs: list[NewJob] = []
        for batch in sorted(counted):
            jobs += _count(cursor, batch, *counted[batch])
    if jobs:
        push(jobs)


# The batches of ids {ids} counted down to 0 whose callbacks are not pushed yet, locked
# ({lock}): a second transaction finishing the same batch waits, then finds it finished.
_SETTLED = (
    "SELECT id, pending, failed, allow_failures, caught_at, cancelled_at, then_call, "
    "catch_call, finally_call FROM laterite_batch WHERE id IN ({ids}) AND pending <= 0 "
    "AND finished_at IS NULL ORDER BY id{lock}"
)
_ALL_SETTLED = (
    "SELECT id FROM laterite_batch WHERE pending <= 0 AND finished_at IS NULL"
)


def finish_settled(using: str, batches: Sequence[int] | None,
                   push: Callable[[list[NewJob]], Any]) -> int:
    """Push the callbacks of `batches` (None: of every batch) that were counted down to 0
    by a transaction that did not push them (PostgreSQL's batch drain counts in the
    claim's round trip, see stores/database_workflows.py), and mark them finished, in
    one transaction: exactly one such transaction finds each one unfinished. Returns
    how many batches it finished."""
    connection = connections[using]
    if batches is None:  # the sweep: one read, and a transaction only for what it finds
        with connection.cursor() as cursor:
            cursor.execute(_ALL_SETTLED)
            batches = [row[0] for row in cursor.fetchall()]
    if not batches:
        return 0
    with transaction.atomic(using=using), connection.cursor() as cursor:
        # SQLite has no row locks: its one writer at a time serializes these anyway.
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        cursor.execute(_SETTLED.format(ids=", ".join(["%s"] * len(batches)), lock=lock),
                       list(batches))
        jobs: list[NewJob] = []
        rows = cursor.fetchall()
        for row in rows:
            jobs += finished_jobs(cursor, row[0], row[1:], 0)
        if jobs:
            push(jobs)
            crash_point("batch.callbacks.after_push")  # dies: rolled back, pushed again
    return len(rows)


def _count(cursor: Any, batch: int, ended: int, failed: int) -> list[NewJob]:
    cursor.execute(_UPDATE, [ended, failed, batch])
    row = cursor.fetchone()
    if row is None:  # finished (or gone): nothing more to count
        cursor.execute("DELETE FROM laterite_batch_end WHERE batch_id = %s", [batch])
        return []
    return finished_jobs(cursor, batch, row, failed)


def finished_jobs(cursor: Any, batch: int, row: Sequence[Any], failed_now: int) -> list[NewJob]:
    """The callbacks due now for a batch whose counts were just moved to `row`, and
    its row marked for them (caught, finished)."""
    pending, failed, allow, caught_at, cancelled_at, then, catch, finally_ = row
    now = timezone.now()
    connection = cursor.db
    stamp = connection.ops.adapt_datetimefield_value(now)
    jobs = []
    if failed_now and not allow and caught_at is None and cancelled_at is None:
        if catch:
            jobs.append(_callback(catch))
        cursor.execute("UPDATE laterite_batch SET caught_at = %s WHERE id = %s", [stamp, batch])
    if pending <= 0:
        if then and cancelled_at is None and (not failed or allow):
            jobs.append(_callback(then))
        if finally_:
            jobs.append(_callback(finally_))
        cursor.execute("UPDATE laterite_batch SET finished_at = %s WHERE id = %s", [stamp, batch])
        cursor.execute("DELETE FROM laterite_batch_end WHERE batch_id = %s", [batch])
    return jobs


def _callback(text: str) -> NewJob:
    return link_job(json.loads(text))
