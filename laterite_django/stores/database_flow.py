"""The database store's flow control: paused queues, cancels (see flow/).

Pauses are rows of `laterite_paused_queue`; a resume on PostgreSQL notifies the
workers' channel as a push does (on SQLite the waiting workers read the paused
set again within LATERITE_QUEUE_POLL). A cancel marks each job it names
(`cancel_requested_at`, which a running job's heartbeat reads), then deletes the
waiting ones into the failed list, in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from ..crash_points import crash_point
from ..flow.cancel import Outcome, reason
from . import database_workflows, sql
from .base import Claim, job_ids

if TYPE_CHECKING:
    from .database import DatabaseStore

__all__ = ["cancel", "cancel_requested", "pause", "paused_queues", "resume"]

PAUSED_TABLE = "laterite_paused_queue"


def pause(store: DatabaseStore, queues: Sequence[str]) -> None:
    now = store._ts(timezone.now())
    for queue in dict.fromkeys(queues):
        store._execute(
            f"INSERT INTO {PAUSED_TABLE} (queue, paused_at) VALUES (%s, %s) "
            f"ON CONFLICT (queue) DO NOTHING", [queue, now])


def resume(store: DatabaseStore, queues: Sequence[str]) -> None:
    if not queues:
        return
    marks = ", ".join(["%s"] * len(queues))
    store._execute(f"DELETE FROM {PAUSED_TABLE} WHERE queue IN ({marks})", list(queues))
    if store.postgres:
        # Wake the idle workers as a push would (delivered at commit).
        for queue in dict.fromkeys(queues):
            store._execute("SELECT pg_notify(%s, %s)", [sql.CHANNEL, queue])


def paused_queues(store: DatabaseStore) -> set[str]:
    rows, _ = store._execute(f"SELECT queue FROM {PAUSED_TABLE}", [], fetch=True)
    return {row[0] for row in rows}


def cancel(store: DatabaseStore, ids: Iterable[int]) -> dict[int, str]:
    wanted = list(dict.fromkeys(job_ids(ids)))
    result = dict.fromkeys(wanted, Outcome.FINISHED)
    if not wanted:
        return result
    marks = ", ".join(["%s"] * len(wanted))
    now = store._ts(timezone.now())
    with transaction.atomic(using=store.database):
        # Marked first, waiting or running: the mark holds each row (its lock on
        # PostgreSQL, the write lock on SQLite) until the commit, so the delete below
        # sees the jobs as the mark found them, and a release that comes after finds
        # the mark (the job's next claim fails it, rules.before_run). Deleted then
        # marked, each statement with its own snapshot, a release committed between
        # the two escaped both: "finished", and the job retried.
        marked, _ = store._execute(
            f"UPDATE {sql.TABLE} SET cancel_requested_at = %s WHERE id IN ({marks}) "
            f"RETURNING id",
            [now, *wanted], fetch=True,
        )
        for (job_id,) in marked:
            result[job_id] = Outcome.ASKED
        rows, _ = store._execute(
            f"DELETE FROM {sql.TABLE} WHERE token IS NULL AND id IN ({marks}) "
            f"RETURNING id, name, queue, payload, priority, unique_key, attempts, pushed_at, "
            f"retried_from_id, retried_from_error",
            wanted, fetch=True,
        )
        for row in rows:
            store._execute(sql.FAIL_INSERT, [*row, now, reason(False)])
            result[row[0]] = Outcome.CANCELLED
        database_workflows.failed_payloads(store, [row[3] for row in rows])
        crash_point("cancel.before_commit")  # dies: rolled back, nothing cancelled
    return result


def cancel_requested(store: DatabaseStore, claims: Sequence[Claim]) -> set[int]:
    if not claims:
        return set()
    pairs = " OR ".join(["(id = %s AND token = %s)"] * len(claims))
    rows, _ = store._execute(
        f"SELECT id FROM {sql.TABLE} WHERE cancel_requested_at IS NOT NULL AND ({pairs})",
        [value for c in claims for value in (c.id, c.token)], fetch=True,
    )
    return {row[0] for row in rows}
