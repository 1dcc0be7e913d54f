"""The database store's side of chains and batches (workflows/): a job of a workflow
is deleted, or moved to the failed list, in the transaction that pushes the next link
of its chain and counts its end on its batch, so a worker killed at any instant
leaves either all of it or none of it done."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction

from ..crash_points import crash_point
from ..flow.limits import any_job_limited, queue_limits
from ..workflows.counts import count_ends, finish_settled, finished_jobs
from ..workflows.ending import End, ends_of, ends_of_payloads, next_links
from ..workflows.marks import marks_of
from . import sql, sql_postgres, sql_workflows_postgres
from .sql import TABLE

if TYPE_CHECKING:
    from .base import Claim, NewJob
    from .database import DatabaseStore

__all__ = ["batch_pattern", "clear", "delete_jobs", "delete_marked", "drop_batch", "fail_counted",
           "failed_payloads", "finish_orphans", "settle_and_claim"]


def delete_marked(store: DatabaseStore, claims: Sequence[Claim]) -> int:
    """Delete finished jobs whose claims are still held, some of a workflow: push the
    next links and count the batch ends of those deleted, in one transaction."""
    if store.postgres and not any('"chain":' in c.payload for c in claims):
        return _delete_counted(store, claims)
    if store.postgres:
        # As the plain deletion: committed without waiting for the WAL flush (see
        # sql_postgres). A crash of the server that loses the commit loses the next
        # link and the count with the deletion, so the job runs again, and they
        # come with it then: never one without the other.
        statement = f"{sql_postgres.DELETE} RETURNING {TABLE}.id"
        params: list = [[c.id for c in claims], [c.token for c in claims]]
    else:
        pairs = ", ".join(["(%s, %s)"] * len(claims))
        statement = f"DELETE FROM {TABLE} WHERE (id, token) IN (VALUES {pairs}) RETURNING id"
        params = [v for c in claims for v in (c.id, c.token)]
    with transaction.atomic(using=store.database):
        rows, _ = store._execute(statement, params, fetch=True)
        deleted = {row[0] for row in rows}
        done = [c for c in claims if c.id in deleted]
        links: list[NewJob] = [new for c in done for new in next_links(c)]
        if links:
            store.push(links)
            crash_point("chain.next.after_push")  # dies: rolled back, the job runs again
        ends = ends_of(done)
        count_ends(store.database, ends, store.push)
        if ends:
            crash_point("batch.count.before_commit")  # dies: rolled back, as above
    return len(deleted)


def settle_and_claim(store: DatabaseStore, finished: Sequence[Claim], queues: Sequence[str],
                     worker: str, limit: int) -> list[Claim]:
    """Finished jobs, some of a chain or batch: their deletion with what their end brings
    (the next link: claimable by this very claim), then the claim, in one transaction
    (one commit). On PostgreSQL, with no chain link due and no limit on the claim, one
    statement (`_counted_claim`)."""
    if (store.postgres and not store.connection.in_atomic_block
            and not any('"chain":' in c.payload for c in finished)
            and not queue_limits(queues) and not any_job_limited()):
        return _counted_claim(store, finished, queues, worker, limit)
    with transaction.atomic(using=store.database):
        delete_marked(store, finished)
        return store._settle_and_claim((), queues, worker, limit)


def fail_counted(store: DatabaseStore, claim: Claim) -> None:
    """Count a job of a batch moved to the failed list (in fail()'s transaction)."""
    count_ends(store.database, ends_of([claim], failed=True), store.push)


def batch_pattern(batch_id: int) -> str:
    """A LIKE pattern for the payloads of the jobs of batch `batch_id`."""
    return f'%"batch":[{int(batch_id)},%'


def clear(store: DatabaseStore, queue: str | None) -> int:
    """Delete every job (of `queue`), waiting or running; return how many. A deleted job
    of a batch counts as failed on it (it never runs, as one cancelled through
    queue_cancel), in the same transaction, so its batch still ends."""
    where, params = ("", []) if queue is None else (" AND queue = %s", [queue])
    with transaction.atomic(using=store.database):
        marked, _ = store._execute(
            f"DELETE FROM {TABLE} WHERE payload LIKE %s{where} RETURNING payload",
            ['%"batch":[%', *params], fetch=True)
        count = store._execute(sql.CLEAR if queue is None else sql.CLEAR_QUEUE, params)[1]
        failed_payloads(store, [text for (text,) in marked])
    return count + len(marked)


def delete_jobs(using: str, ids: Sequence[int], push: Callable[[list[NewJob]], Any]) -> int:
    """Delete the jobs `ids` of database `using` (the admin's Delete), waiting or
    running; those of a batch count as failed on it, in the same transaction, as
    `clear` counts them. Returns how many were deleted."""
    deleted = 0
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        payloads: list[str] = []
        for start in range(0, len(ids), 500):
            chunk = [int(i) for i in ids[start:start + 500]]
            cursor.execute(f"DELETE FROM {TABLE} WHERE id IN ({', '.join(['%s'] * len(chunk))}) "
                           f"RETURNING payload", chunk)
            rows = cursor.fetchall()
            deleted += len(rows)
            payloads += [text for (text,) in rows]
        count_ends(using, ends_of_payloads(payloads, failed=True), push)
    return deleted


def drop_batch(store: DatabaseStore, batch_id: int) -> int:
    """Delete the jobs of a cancelled batch that have not started, counting each as
    ended (not failed); return how many."""
    lock = " FOR UPDATE SKIP LOCKED" if store.postgres else ""
    with transaction.atomic(using=store.database):
        rows, _ = store._execute(
            f"SELECT id, payload FROM {TABLE} WHERE token IS NULL AND payload LIKE %s{lock}",
            [batch_pattern(batch_id)], fetch=True)
        # The pattern also matches a job whose arguments hold such a list: only the
        # jobs whose own mark names this batch are removed.
        rows = [row for row in rows if (marks_of(row[1]).batch or (None,))[0] == batch_id]
        ends: list[End] = []
        removed = 0
        for chunk in range(0, len(rows), 500):
            ids = [row[0] for row in rows[chunk:chunk + 500]]
            marks = ", ".join(["%s"] * len(ids))
            gone, _ = store._execute(
                f"DELETE FROM {TABLE} WHERE id IN ({marks}) AND token IS NULL "
                f"RETURNING id, payload", ids, fetch=True)
            removed += len(gone)
            ends += ends_of_payloads([text for _, text in gone])
        count_ends(store.database, ends, store.push)
    return removed


def failed_payloads(store: DatabaseStore, payloads: Sequence[str]) -> None:
    """Count the jobs of these payloads, moved to the failed list, on their batches."""
    count_ends(store.database, ends_of_payloads(payloads, failed=True), store.push)


def _counted_claim(store: DatabaseStore, finished: Sequence[Claim], queues: Sequence[str],
                   worker: str, limit: int) -> list[Claim]:
    """PostgreSQL, finished jobs of batches (no chain link due, no limit on the claim):
    their deletion and count with the plain claim, in one statement (COUNTED_CLAIM: one
    round trip, as the plain drain's claim). The callbacks of a batch it counted down
    to 0 are pushed just after, by `finish_settled` (exactly once: it marks the batch
    finished in the transaction that pushes them); a worker that dies in between
    leaves the batch to the sweep (`finish_orphans`)."""
    import uuid

    from .database_claim import _claim_from_row

    params = sql_workflows_postgres.counted_claim_params(
        finished, _ends(finished),
        sql_postgres.claim_params(uuid.uuid4().hex, worker, queues, limit))
    rows, _ = store._hot(sql_workflows_postgres.COUNTED_CLAIM, params, fetch=True)
    settled = rows[0][-1] if rows else None
    if settled:
        crash_point("batch.count.after_decrement")  # committed; callbacks: the sweep's
    if settled and finish_settled(store.database, settled, store.push):
        # Pushed after this claim was made: the worker's flush() says so, so that a
        # worker about to stop for an empty queue claims once more.
        store._local.callbacks_pushed = True
    claims = [_claim_from_row(row) for row in rows if row[0] is not None]
    return sorted(claims, key=lambda c: c.position)


def finish_orphans(store: DatabaseStore) -> int:
    """The sweep's part: push the callbacks of batches counted down to 0 by a worker
    that died before it pushed them (see `_counted_claim`)."""
    return finish_settled(store.database, None, store.push)


def _ends(claims: Sequence[Claim]) -> list[tuple[int, int, int]]:
    """(claim id, batch, position) for each of `claims` of a batch."""
    return [(claim.id, end.batch, end.position) for claim in claims for end in ends_of([claim])]


def _delete_counted(store: DatabaseStore, claims: Sequence[Claim]) -> int:
    """PostgreSQL, jobs of batches and plain ones: the deletion and the counts in one
    statement (sql_workflows_postgres), the callbacks of a batch it finished pushed
    before the commit."""
    with transaction.atomic(using=store.database):
        rows, _ = store._hot(sql_workflows_postgres.COUNTED_DELETE,
                             sql_workflows_postgres.counted_delete_params(claims, _ends(claims)),
                             fetch=True)
        _finish_batches(store, rows)
        crash_point("batch.count.before_commit")
    return int(rows[0][0]) if rows else 0


def _finish_batches(store: DatabaseStore, rows: Sequence[Sequence]) -> None:
    """Push the callbacks of the batches COUNTED_DELETE took to 0 (in its transaction)."""
    done = [row for row in rows if row[1] is not None and row[2] <= 0]
    if not done:
        return
    jobs: list[NewJob] = []
    with store.connection.cursor() as cursor:
        for row in done:
            jobs += finished_jobs(cursor, row[1], row[2:], 0)
    if jobs:
        store.push(jobs)
