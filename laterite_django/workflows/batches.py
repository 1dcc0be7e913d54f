"""`batch(calls, then=, catch=, finally_=, allow_failures=, name=)`: jobs run together,
then callbacks, each pushed exactly once (see stores/database/workflows.py); adding calls to a
running batch (`cx.add_to_batch`); cancelling one (`queue_batches --cancel`).

The `Batch` row and its jobs are written in one transaction: the database store's
push joins it, the Redis store's goes to its outbox in it (moved to Redis at the
commit), so a batch is never half pushed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypedDict, Unpack

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from .. import capture
from ..async_push import refuse_event_loop
from ..calls import JobCall
from ..conf import settings
from ..registry import registry
from ..stores import get_store
from ..stores.database.workflows import add_to_batch as count_added
from ..stores.database.workflows import empty_batch_callbacks

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ..core.values import NewJob
    from ..models import Batch

__all__ = ["BatchParams", "BatchPlan", "add_to_batch", "batch", "cancel_batch"]


def _batches() -> QuerySet[Batch]:
    """Every batch's row, on laterite's database."""
    # Models load after the app registry is ready (laterite_django/__init__ imports this
    # module while Django loads INSTALLED_APPS): imported on first use.
    from ..models import Batch

    return Batch.objects.using(settings.DATABASE)


def _checked(calls: object, what: str) -> list[JobCall]:
    if isinstance(calls, JobCall):
        calls = [calls]
    if not isinstance(calls, Iterable) or isinstance(calls, (str, bytes)):
        raise TypeError(f"{what} takes a list of calls made with job.call(...), "
                        f"not {calls!r:.80}.")
    found = list(calls)
    for call in found:
        if not isinstance(call, JobCall):
            raise TypeError(f"{what} takes calls made with job.call(...), not {call!r:.80}.")
    return found


def _callback(call: JobCall | None, what: str) -> str:
    if call is None:
        return ""
    if not isinstance(call, JobCall):
        raise TypeError(f"batch({what}=...) takes a call made with job.call(...), "
                        f"not {call!r:.80}.")
    return json.dumps(call.link(), separators=(",", ":"), ensure_ascii=False)


class BatchPlan:
    """A batch about to be pushed."""

    def __init__(
        self,
        calls: Sequence[JobCall],
        *,
        then: JobCall | None = None,
        catch: JobCall | None = None,
        finally_: JobCall | None = None,
        allow_failures: bool = False,
        name: str = "",
    ) -> None:
        self.calls = _checked(calls, "batch()")
        self.then, self.catch, self.finally_ = then, catch, finally_
        self.callbacks = (_callback(then, "then"), _callback(catch, "catch"),
                          _callback(finally_, "finally_"))
        if not isinstance(allow_failures, bool):
            raise TypeError(f"batch(allow_failures=...) must be True or False, "
                            f"not {allow_failures!r}.")
        if not isinstance(name, str) or len(name) > 200:
            raise ValueError(f"batch(name=...) must be a string of at most 200 characters, "
                             f"not {name!r:.80}.")
        self.allow_failures = allow_failures
        self.name = name

    def __repr__(self) -> str:
        return f"<BatchPlan {self.name or ''} of {len(self.calls)} calls>"

    def push(self) -> Batch:
        """Write the Batch row and push its jobs in one transaction; return the row.

        Inline mode runs the jobs now, then the callbacks as a worker would push them;
        `testing.capture_jobs()` records the jobs and returns an unsaved row."""
        refuse_event_loop("batch")
        now = timezone.now()
        row = _batches().model(name=self.name, total=len(self.calls), pending=len(self.calls),
                    allow_failures=self.allow_failures, then_call=self.callbacks[0],
                    catch_call=self.callbacks[1], finally_call=self.callbacks[2],
                    created_at=now)
        if capture.capturing():
            for call in self.calls:
                capture.record(call.job, [call.new_job()])
            return row
        if settings.MODE == "inline":
            return self._run_inline(row)
        using = settings.DATABASE
        with transaction.atomic(using=using):
            row.save(using=using)
            jobs = [call.new_job(batch=(row.pk, i)) for i, call in enumerate(self.calls)]
            if jobs:
                _store(jobs)
            else:  # nothing to wait for: the callbacks go now
                callbacks = empty_batch_callbacks(using, row.pk, row.allow_failures,
                                                  self.callbacks)
                if callbacks:
                    _store(callbacks)
                row.refresh_from_db(using=using)
        return row

    async def apush(self) -> Batch:
        """`push()` from async code, off the event loop."""
        return await sync_to_async(self.push, thread_sensitive=True)()

    def _run_inline(self, row: Batch) -> Batch:
        """Run the jobs, then `then` (or `catch` at a failure) and `finally_`, here."""
        failed = None
        for call in self.calls:
            try:
                call.job.enqueue(call.args, call.kwargs)
            except Exception as e:
                row.failed += 1
                failed = failed or e
                if not self.allow_failures:
                    break
            finally:
                row.pending -= 1
        try:
            if failed is not None and not self.allow_failures and self.catch is not None:
                self.catch.job.enqueue(self.catch.args, self.catch.kwargs)
            elif (failed is None or self.allow_failures) and self.then is not None:
                self.then.job.enqueue(self.then.args, self.then.kwargs)
        finally:
            if self.finally_ is not None:
                self.finally_.job.enqueue(self.finally_.args, self.finally_.kwargs)
        if failed is not None and not self.allow_failures:
            raise failed
        row.pending, row.finished_at = 0, timezone.now()
        return row


def _store(jobs: list[NewJob]) -> None:
    """Hand jobs of any names to the store, in the open transaction (see module doc)."""
    job = registry.find(jobs[0].name)
    if job is None:  # a callback whose job is unknown here: stored as written
        get_store().push(jobs)
        return
    job.store_jobs(jobs)


class BatchParams(TypedDict, total=False):
    """The options `batch()` hands to BatchPlan, typed as BatchPlan takes them (which
    gives their defaults); mypy checks the one against the other where batch() passes them."""

    then: JobCall | None
    catch: JobCall | None
    finally_: JobCall | None
    allow_failures: bool
    name: str


def batch(calls: Sequence[JobCall], **options: Unpack[BatchParams]) -> BatchPlan:
    """Jobs to run together, then callbacks: `batch([a.call(1), ...], then=b.call()).push()`.

    `then` is pushed once when every job succeeded (or, with allow_failures=True, when
    all ended), `catch` once at the first job that failed for good, `finally_` once
    when every job ended either way. The options are BatchPlan's, with its defaults
    (`allow_failures=False`, `name=""`)."""
    return BatchPlan(calls, **options)


def add_to_batch(batch_id: int, calls: Sequence[JobCall]) -> int:
    """Add calls to a batch that has not finished (a job of it adds them before it ends,
    so the callbacks wait for them); return how many were added: none to a cancelled
    batch."""
    calls = _checked(calls, "add_to_batch()")
    if not calls:
        return 0
    using = settings.DATABASE
    with transaction.atomic(using=using):
        total = count_added(using, batch_id, len(calls))
        if total is None:
            found = _batches().filter(pk=batch_id).first()
            if found is not None and found.cancelled_at is not None:
                return 0  # a job of a cancelled batch still running: nothing to add
            raise ValueError(f"Batch {batch_id} has finished (or does not exist): "
                             f"nothing can be added to it.")
        start = total - len(calls)
        _store([call.new_job(batch=(batch_id, start + i)) for i, call in enumerate(calls)])
    return len(calls)


def cancel_batch(batch_id: int) -> int:
    """Cancel a batch: its jobs not started yet are removed (counted as ended, not as
    failed), running ones finish; `then` and `catch` are never pushed, `finally_` is,
    once every job has ended. Return how many jobs were removed now (a job claimed
    meanwhile is dropped by the worker that claimed it, unrun)."""
    rows = _batches()
    updated = rows.filter(
        pk=batch_id, finished_at__isnull=True, cancelled_at__isnull=True
    ).update(cancelled_at=timezone.now())
    if not updated:
        if not rows.filter(pk=batch_id).exists():
            raise ValueError(f"No batch has id {batch_id}.")
        return 0
    return get_store().drop_batch(batch_id)
