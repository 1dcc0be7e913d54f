"""The Redis store's outbox: pushes made inside a database transaction.

Redis cannot join the caller's transaction, so a push inside `transaction.atomic()`
is written to the `OutboxJob` table in it: it commits with the caller's data or
rolls back with it. After the commit a hook moves the rows to Redis; if Redis is
away then, the hook logs a warning and the rows wait for the workers' periodic sweep
(`RedisStore.requeue_abandoned`), which moves whatever the outbox holds.

A move deletes its rows and pushes them to Redis in one database transaction
(rows locked with SKIP LOCKED on PostgreSQL; SQLite lets one writer in at a time),
so two movers never move one row twice, and a failed push leaves the rows in place.
If the commit is lost after the push (the mover killed between the two), the rows
come back and are moved again: each row's push carries a mark that Redis keeps for
a week (ONCE_TTL), and a job whose mark is set is not stored a second time (a job
with a concurrency limit too: its script is PUSH's, marks included).
Unique keys are checked when a row reaches Redis, where a duplicate is dropped.
A job due at once or after a delay (NewJob.delay) keeps its delay in the row and is
due that long after its move, by Redis's clock: the clock every due time is compared
with, and the only one the pusher and the mover (another host's sweep) share. The
time it spent in the outbox is not taken off, which would need a clock common to
both; a move follows the commit within milliseconds, and while Redis is away, which
is what keeps rows longer, no push reaches it either.
A retry from the failed list takes this road too (redis_failed.push_retried), so its
jobs reach Redis only once the deletion of their failed rows commits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from django.db import transaction

from ...core.crash_points import crash_point
from ...core.values import NewJob
from ...exceptions import PushNotReplicated
from ..callbacks import with_limit

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["hold", "move", "sweep"]

logger = logging.getLogger("laterite")

# Rows per move transaction (and per Redis push).
BATCH = 500


def _rows(store: RedisStore):
    from ...models import OutboxJob

    return OutboxJob.objects.using(store.database)


def hold(store: RedisStore, jobs: Sequence[NewJob],
         then: Callable[[list[int | None]], None] | None = None) -> None:
    """Write `jobs` to the outbox in the open transaction; move them when it commits.

    `then`, if given, is called after that move with the jobs' ids in Redis, in order
    (None for one not stored, or moved by someone else); it must not raise.
    """
    from ...models import OutboxJob

    created = _rows(store).bulk_create(
        [OutboxJob(**{field: getattr(job, field) for field in KEPT}) for job in jobs],
        batch_size=BATCH,
    )
    ids = [row.pk for row in created]
    crash_point("push.outbox_written")  # dies: the caller's transaction rolls back
    # Without the ids (SQLite before 3.35 returns none), the hook moves the whole outbox.
    transaction.on_commit(
        lambda: _after_commit(store, None if None in ids else ids, then), using=store.database
    )


def _after_commit(store: RedisStore, ids: list[int] | None,
                  then: Callable[[list[int | None]], None] | None = None) -> None:
    """Move the committed rows to Redis, then call `then` (see hold); never raise, so
    later on-commit hooks run."""
    crash_point("push.outbox.after_commit")  # committed, not moved: the sweep's
    pushed: dict[int, int | None] = {}
    try:
        if ids is None:
            move(store)
        else:
            pushed = _move_ids(store, ids)
    except Exception as e:
        what = "the outbox's jobs" if ids is None else f"{len(ids)} job{'s' * (len(ids) != 1)}"
        logger.warning(
            "Could not send %s to Redis after the commit (%s); they wait in the database "
            "outbox until a worker's sweep sends them.", what, e,
            extra={"action": "outbox_kept", "count": None if ids is None else len(ids)},
        )
        return
    if then is not None and ids is not None:
        then([pushed.get(i) for i in ids])


def move(store: RedisStore, ids: Sequence[int] | None = None) -> int:
    """Move outbox rows (these ids, or all) to Redis, oldest first; return how many."""
    if ids is not None:
        return len(_move_ids(store, ids))
    moved = 0
    while batch := _move_batch(store, _rows(store)):
        moved += len(batch)
    return moved


def _move_ids(store: RedisStore, ids: Sequence[int]) -> dict[int, int | None]:
    """Move the outbox rows `ids`; return the id in Redis of each row moved here (None:
    not stored, as a duplicate or as pushed before)."""
    pushed: dict[int, int | None] = {}
    for start in range(0, len(ids), BATCH):
        pushed.update(_move_batch(store, _rows(store).filter(pk__in=ids[start : start + BATCH])))
    return pushed


def _move_batch(store: RedisStore, chosen) -> dict[int, int | None]:
    """Delete up to BATCH rows of `chosen` and push them, in one transaction; return
    each moved row's id in Redis by its own (see _move_ids)."""
    with transaction.atomic(using=store.database):
        rows = list(chosen.order_by("pk").select_for_update(skip_locked=True)[:BATCH])
        if not rows:
            return {}
        deleted, _ = _rows(store).filter(pk__in=[row.pk for row in rows]).delete()
        if deleted != len(rows):  # another mover got there first: leave it to them
            transaction.set_rollback(True, using=store.database)
            return {}
        jobs = [
            # The outbox keeps no concurrency key: it is computed again, as at the push.
            with_limit(NewJob(**{field: getattr(row, field) for field in KEPT}))
            for row in rows
        ]
        try:
            # Marked with their rows: if this transaction's commit is lost after the
            # push (a crash, a lost connection), the rows come back and are moved
            # again, and Redis stores each job once all the same.
            ids = store.push(jobs, once=[_mark(row) for row in rows])
            crash_point("push.outbox.after_redis_push")  # dies: the rows come back
        except PushNotReplicated as e:
            # On the primary all the same: moved. Pushing them again would double them.
            logger.warning("%s", e, extra={"action": "push_not_replicated"})
            ids = e.ids
    return {row.pk: job_id for row, job_id in zip(rows, ids, strict=True)}


# The fields of a NewJob an outbox row keeps, the same on both: written to the row at
# the push, read back into a NewJob at the move (the concurrency key is not kept).
KEPT = ("name", "queue", "payload", "priority", "pushed_at", "available_at", "retry_until",
        "unique_key", "delay")


def _mark(row) -> str:
    """A row's mark for the PUSH script's `once`: its id and push time (microseconds),
    unique even if the table's ids start again."""
    return f"outbox:{row.pk}:{int(row.pushed_at.timestamp() * 1_000_000)}"


def sweep(store: RedisStore) -> int:
    """Move whatever the outbox holds (the workers' sweep); log and go on if that fails,
    since the rows stay for the next sweep."""
    try:
        if not _rows(store).exists():
            return 0
        return move(store)
    except Exception as e:
        logger.warning(
            "Could not send the database outbox's jobs to Redis (%s); the next sweep "
            "tries again.", e, extra={"action": "outbox_kept"},
        )
        return 0
