"""The failed list, which lives in the database for every store, and the admin's and
the commands' reads of it: counts, retry, forget, listing, names, row estimates."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from django.db import connections, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from ..core.crash_points import crash_point
from ..core.sequences import MARK, HeldSequence, as_retry_of, sequence_of
from ..core.values import NewJob
from . import estimates
from .callbacks import with_fair_turn, with_limit
from .errors import guarded

if TYPE_CHECKING:
    from ..models import FailedJob, Job

__all__ = ["FailedList"]


# Params: cap + 1. The failed jobs per queue, each queue's counted up to a cap through
# laterite_failed_queue (a loose index scan for the queues).
CAPPED_FAILED_COUNTS = (
    "WITH RECURSIVE queues(queue) AS ("
    "SELECT MIN(queue) FROM laterite_failed_job "
    "UNION ALL SELECT (SELECT MIN(queue) FROM laterite_failed_job WHERE queue > queues.queue) "
    "FROM queues WHERE queues.queue IS NOT NULL"
    ") SELECT queue, (SELECT COUNT(*) FROM (SELECT 1 FROM laterite_failed_job f "
    "WHERE f.queue = queues.queue LIMIT %s) c) FROM queues WHERE queue IS NOT NULL"
)


class FailedList:
    """The Store methods that read and change the failed list (a mixin of Store)."""

    database: str

    if TYPE_CHECKING:  # the store's own
        def push(self, jobs: Sequence[NewJob]) -> list[int | None]: ...
        def _sequences_forgotten(self, jobs: Sequence[tuple[int, str]]) -> None: ...

    # -- the failed list (in the database for every store) --------------------

    def _failed_rows(self, ids: Iterable[int] | None) -> QuerySet[FailedJob]:
        """The failed jobs (these ids, or all) on this store's database."""
        # Models load after the app registry is ready (stores/__init__ imports this module
        # while Django loads INSTALLED_APPS): imported on first use.
        from ..models import FailedJob

        rows = FailedJob.objects.using(self.database)
        return rows.all() if ids is None else rows.filter(pk__in=list(ids))

    def _job_rows(self) -> QuerySet[Job]:
        """The `Job` table's rows on this store's database (the database store's jobs;
        the retried_from_* columns of a retried job)."""
        # Models load after the app registry is ready: imported on first use (as above).
        from ..models import Job

        return Job.objects.using(self.database)

    @guarded
    def failed_payloads(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(id, payload) of up to `limit` failed jobs with an id above `after`, by id."""
        rows = self._failed_rows(None).filter(pk__gt=after).order_by("pk")
        return list(rows.values_list("pk", "payload")[:limit])

    @guarded
    def replace_failed_payloads(self, changes: Sequence[tuple[int, str, str]]) -> int:
        """Set the payload of each failed job (id, old, new) still holding `old`; return
        how many were set."""
        count = 0
        with transaction.atomic(using=self.database):
            for pk, old, new in changes:
                count += self._failed_rows([pk]).filter(payload=old).update(payload=new)
        return count

    @guarded
    def failed_counts(self, cap: int | None = None) -> dict[str, int]:
        """Return the number of failed jobs per queue; with `cap`, each counted up to
        cap + 1 at most, through the queue index (more than `cap` reads as cap + 1)."""
        if cap is not None:
            rows = self._failed_rows(None)
            with connections[rows.db].cursor() as cursor:
                cursor.execute(CAPPED_FAILED_COUNTS, [cap + 1])
                return {queue: int(n) for queue, n in cursor.fetchall()}
        return dict(
            self._failed_rows(None)
            .values_list("queue")
            .annotate(n=Count("id"))
            .values_list("queue", "n")
        )

    @guarded
    def retry(self, ids: Iterable[int] | None = None) -> int:
        """Put failed jobs (these ids, or all) back on their queues, due now, attempts afresh.

        Return how many were put back; a retried job whose unique key already
        waits is dropped as a duplicate but still leaves the failed list. Each new
        job records the failed job it came from (`_link_retried`). A retry that does
        not commit puts nothing back (`_push_retried`).
        """
        now = timezone.now()
        moved = 0
        with transaction.atomic(using=self.database):
            rows = list(self._failed_rows(ids).select_for_update().order_by("id"))
            if not rows:
                return 0
            pushed = self._push_retried(
                [
                    with_fair_turn(with_limit(
                        NewJob(
                            name=row.name,
                            queue=row.queue,
                            # A job of a sequence held by this failed job takes
                            # its head again (core/sequences.py).
                            payload=as_retry_of(row.payload, row.job_id),
                            available_at=now,
                            pushed_at=now,
                            delay=0.0,  # due at the store's now, by its clock
                            unique_key=row.unique_key,
                            priority=row.priority,
                        )
                    ))
                    for row in rows
                ],
                rows,
            )
            crash_point("failed.retry.after_push")  # the rows not yet deleted
            self._link_retried(
                [(job_id, row) for job_id, row in zip(pushed, rows, strict=True) if job_id]
            )
            moved = len(rows)
            self._failed_rows([row.pk for row in rows]).delete()
        return moved

    def _push_retried(self, jobs: Sequence[NewJob], rows: Sequence[FailedJob]
                      ) -> list[int | None]:
        """Push `jobs`, one per failed row of `rows`, in the retry's transaction, which
        must move each exactly once: return their ids to link (None: not linked here).
        The database store's push commits or rolls back with the rows' deletion; the
        Redis store's goes through its outbox and is linked there (RedisStore._push_retried)."""
        return self.push(jobs)

    def _link_retried(self, links: Sequence[tuple[int, FailedJob]]) -> None:
        """Record on each retried job (its new id) the failed job it came from and
        that one's error, as its `Job` row's `retried_from_*` columns. The Redis
        store keeps them in the job's data instead."""
        jobs = self._job_rows()
        rows = [
            jobs.model(pk=job_id, retried_from_id=failed.pk,
                       retried_from_error=failed.error_summary)
            for job_id, failed in links
        ]
        jobs.bulk_update(
            rows, ["retried_from_id", "retried_from_error"], batch_size=500
        )

    @guarded
    def forget(self, ids: Iterable[int] | None = None) -> int:
        """Delete failed jobs (these ids, or all); return how many. A sequence one of them
        held goes on (core/sequences.py), in the same transaction."""
        rows = self._failed_rows(ids)
        with transaction.atomic(using=self.database):
            sequenced = [(job_id, mark.key) for job_id, text in rows.filter(
                payload__startswith=MARK).values_list("job_id", "payload")
                if job_id is not None and (mark := sequence_of(text)) is not None]
            deleted, _ = rows.delete()
            if sequenced:
                self._sequences_forgotten(sequenced)
        return deleted

    def _held_rows(self, held: list[HeldSequence]) -> list[HeldSequence]:
        """`held` (held sequences), each with its failed head's queue and failed row."""
        rows = {job_id: (pk, queue) for pk, job_id, queue in self._failed_rows(None).filter(
            job_id__in=[h.job_id for h in held if h.job_id is not None]).values_list(
            "pk", "job_id", "queue")}
        return [replace(h, failed_id=rows[h.job_id][0], queue=rows[h.job_id][1])
                if h.job_id in rows else h for h in held]

    def _failed_states(self, ids: Sequence[int]) -> dict[int, str]:
        """"failed" for each of `ids` whose job is in the failed list (job_states)."""
        found = self._failed_rows(None).filter(job_id__in=list(ids))
        return {job_id: "failed" for job_id in found.values_list("job_id", flat=True)
                if job_id is not None}

    # -- reads for the admin and the commands -----------------------------------
    # The failed list and the tables behind the admin's lists are in the
    # database for every store, so these are implemented here once.

    @guarded
    def failed_jobs(
        self,
        ids: Iterable[int] | None = None,
        *,
        queue: str | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> list[FailedJob]:
        """Return failed jobs (these ids, or all) of `queue` and `name` if given,
        newest first, at most `limit` of them."""
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be 1 or more, got {limit!r}.")
        rows = self._failed_rows(ids)
        if queue is not None:
            rows = rows.filter(queue=queue)
        if name is not None:
            rows = rows.filter(name=name)
        rows = rows.order_by("-failed_at", "-id")
        return list(rows if limit is None else rows[:limit])

    @guarded
    def missing_failed(self, ids: Iterable[int]) -> list[int]:
        """Return those of `ids` that no failed job has, in the order given, once each."""
        wanted = list(dict.fromkeys(ids))
        found = set(self._failed_rows(wanted).values_list("pk", flat=True))
        return [i for i in wanted if i not in found]

    @guarded
    def job_names(self, model: type[Job | FailedJob], limit: int = 500) -> list[str]:
        """Return the first `limit` distinct job names in `model`'s table, sorted:
        through its name index where it has one (the failed list), else by reading
        every row once (the job table)."""
        return estimates.distinct_names(self.database, model, limit)

    @guarded
    def estimated_rows(self, model: type[Job | FailedJob]) -> int | None:
        """Return the database's estimate of the rows in `model`'s table without
        counting them, or None where it has none (SQLite, a table never analyzed)."""
        return estimates.estimated_rows(self.database, model)
