"""Chains and batches on the database (workflows/): the batch counts every store keeps
in the database, and the database store's own pieces of them.

A batch's counts, moved in the database for every store, and its callbacks pushed
by the transaction that moves them: the one that deletes the job on the database
store, the one that records its end on Redis (see stores/redis/store.py). One
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

The database store's side (DatabaseStore's settle, clear, fail and cancel): a job of a
workflow is deleted, or moved to the failed list, in the transaction that pushes the
next link of its chain and counts its end on its batch, so a worker killed at any
instant leaves either all of it or none of it done.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.utils import timezone

from ...core.crash_points import crash_point
from ...core.ending import ends_of, ends_of_payloads
from ..callbacks import link_job
from . import postgres, sql, sqlite
from .sql import ADD_TO_BATCH

if TYPE_CHECKING:
    from ...core.ending import End
    from ...core.values import Claim, NewJob

__all__ = ["ADD_TO_BATCH", "add_to_batch", "batch_ends", "batch_pattern", "count_ends",
           "delete_jobs", "empty_batch_callbacks", "finish_settled", "finished_jobs"]

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
            cursor.execute(postgres.COUNT_ENDS, [[end.batch for end in ends],
                                             [end.position for end in ends],
                                             [end.failed for end in ends]])
            for batch, ended, failed in cursor.fetchall():
                counted[int(batch)] = [int(ended), int(failed)]
        else:
            new = set()
            for start in range(0, len(ends), 5000):  # SQLite's limit of parameters
                part = ends[start:start + 5000]
                cursor.execute(sqlite.insert_ends(len(part)),
                               [v for end in part for v in (end.batch, end.position)])
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


def finish_settled(using: str, batches: Sequence[int] | None,
                   push: Callable[[list[NewJob]], Any]) -> int:
    """Push the callbacks of `batches` (None: of every batch) that were counted down to 0
    by a transaction that did not push them (PostgreSQL's batch drain counts in the
    claim's round trip, see DatabaseStore._counted_claim), and mark them finished, in
    one transaction: exactly one such transaction finds each one unfinished. Returns
    how many batches it finished."""
    connection = connections[using]
    if batches is None:  # the sweep: one read, and a transaction only for what it finds
        with connection.cursor() as cursor:
            cursor.execute(sql.ALL_SETTLED)
            batches = [row[0] for row in cursor.fetchall()]
    if not batches:
        return 0
    with transaction.atomic(using=using), connection.cursor() as cursor:
        # SQLite has no row locks: its one writer at a time serializes these anyway.
        cursor.execute(sql.settled(len(batches), connection.features.has_select_for_update),
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
    cursor.execute(sql.COUNT_BATCH, [ended, failed, batch])
    row = cursor.fetchone()
    if row is None:  # finished (or gone): nothing more to count
        cursor.execute(sql.DELETE_BATCH_ENDS, [batch])
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
        cursor.execute(sql.BATCH_CAUGHT, [stamp, batch])
    if pending <= 0:
        if then and cancelled_at is None and (not failed or allow):
            jobs.append(_callback(then))
        if finally_:
            jobs.append(_callback(finally_))
        cursor.execute(sql.BATCH_FINISHED, [stamp, batch])
        cursor.execute(sql.DELETE_BATCH_ENDS, [batch])
    return jobs


def _callback(text: str) -> NewJob:
    return link_job(json.loads(text))


def batch_pattern(batch_id: int) -> str:
    """A LIKE pattern for the payloads of the jobs of batch `batch_id`."""
    return f'%"batch":[{int(batch_id)},%'


def delete_jobs(using: str, ids: Sequence[int], push: Callable[[list[NewJob]], Any]) -> int:
    """Delete the jobs `ids` of database `using` (the admin's Delete), waiting or
    running; those of a batch count as failed on it, in the same transaction, as
    `clear` counts them. Returns how many were deleted."""
    deleted = 0
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        payloads: list[str] = []
        for start in range(0, len(ids), 500):
            chunk = [int(i) for i in ids[start:start + 500]]
            cursor.execute(sql.delete_jobs(len(chunk)), chunk)
            rows = cursor.fetchall()
            deleted += len(rows)
            payloads += [text for (text,) in rows]
        count_ends(using, ends_of_payloads(payloads, failed=True), push)
    return deleted


def batch_ends(claims: Sequence[Claim]) -> list[tuple[int, int, int]]:
    """(claim id, batch, position) for each of `claims` of a batch."""
    return [(claim.id, end.batch, end.position) for claim in claims for end in ends_of([claim])]


def add_to_batch(using: str, batch_id: int, added: int) -> int | None:
    """Count `added` more jobs on batch `batch_id` (in the caller's transaction); its new
    total, or None if it has finished, was cancelled or does not exist."""
    with connections[using].cursor() as cursor:
        cursor.execute(ADD_TO_BATCH, [added, added, batch_id])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def empty_batch_callbacks(using: str, batch_id: int, allow_failures: bool,
                          callbacks: Sequence[str | None]) -> list[NewJob]:
    """The callbacks of a batch pushed without jobs (then, catch, finally: their calls as
    stored), due at once, and its row marked finished (in the caller's transaction)."""
    with connections[using].cursor() as cursor:
        return finished_jobs(cursor, batch_id, (0, 0, allow_failures, None, None, *callbacks), 0)
