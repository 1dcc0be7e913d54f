"""Enqueueing a task on laterite (`enqueue_task`): its result record and its `laterite.task` job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from django.utils.crypto import get_random_string

from .. import encryption
from ..conf import settings
from ..context import Pushed
from ..core.sizes import UNIQUE_KEY_MAX, too_long
from ..exceptions import PushNotReplicated
from ..payload import check_keys, check_text
from ..stores import get_store
from .compat import Task, TaskResult, TaskResultStatus, task_enqueued
from .encrypted import shown_arguments
from .limits import concurrency_of
from .results import build_result, records
from .runner import task_job

if TYPE_CHECKING:
    from ..models import TaskResultRecord
    from .backend import LateriteBackend

__all__ = ["enqueue_task", "unique_key_of", "waiting_result"]


def unique_key_of(task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    """The task's unique_key for these arguments, checked, or None."""
    make_key = getattr(task, "unique_key", None)
    if make_key is None:
        return None
    key = make_key(*args, **kwargs)
    if key is not None and not isinstance(key, str):
        raise TypeError(
            f"Task {task.module_path!r}: unique_key returned {key!r}; it must return a str "
            f"or None."
        )
    problem = key and too_long("the unique_key", key, UNIQUE_KEY_MAX)
    if problem:
        raise ValueError(f"Task {task.module_path!r}: {problem}.")
    return key

def enqueue_task(
    backend: LateriteBackend, task: Task, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> TaskResult:
    """Store the task as a laterite job and return its result, READY.

    A task with a unique_key whose key already waits is not queued again:
    the waiting task's result is returned instead.
    """
    backend.validate_task(task)
    enqueued_at = timezone.now()
    result: TaskResult[Any] = TaskResult(
        task=task,
        id=get_random_string(32),
        status=TaskResultStatus.READY,
        enqueued_at=enqueued_at,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=list(args),
        kwargs=dict(kwargs),
        backend=backend.alias,
        errors=[],
        worker_ids=[],
    )
    check_keys(f"Task {task.module_path!r}", result.args, result.kwargs)
    check_text(f"Task {task.module_path!r}", result.args, result.kwargs)
    encrypted = bool(getattr(task, "encrypt", False))
    key = unique_key_of(task, result.args, result.kwargs)
    limited = concurrency_of(backend, task, result.args, result.kwargs)
    kept_args, kept_kwargs = result.args, result.kwargs  # what its record keeps
    if encrypted:
        # Keys made from its arguments as keyed hashes; the record keeps the arguments
        # with the encrypted ones as placeholders (see tasks/encrypted.py).
        if key is not None:
            key = encryption.hashed(task.module_path, key)
        if limited is not None and limited[1] != task.module_path:
            limited = limited[0], encryption.hashed(task.module_path, limited[1])
        kept_args, kept_kwargs = shown_arguments(task, result.args, result.kwargs)
    call: dict[str, Any] = {
        "task": task.module_path,
        "args": result.args,
        "kwargs": result.kwargs,
        "backend": backend.alias,
        "result": result.id,
    }
    if key is not None:
        call["unique_key"] = key
    if limited is not None:
        call["concurrency"], call["concurrency_key"] = limited
    job = task_job(encrypted)
    inline = settings.MODE == "inline"

    def record(job_id: object = None) -> TaskResultRecord:
        return records().create(
            id=result.id,
            task_path=task.module_path,
            backend=backend.alias,
            queue=task.queue_name,
            priority=task.priority,
            run_after=task.run_after,
            args=kept_args,
            kwargs=kept_kwargs,
            status=TaskResultStatus.READY,
            enqueued_at=enqueued_at,
            job_id="" if job_id is None else str(job_id),
            unique_key=key or "",
        )

    def push() -> Pushed:
        return job.enqueue((), call, at=task.run_after, queue=task.queue_name,
                           priority=task.priority)

    database = settings.DATABASE
    if inline:
        # The task runs at the push: its result must exist first.
        with transaction.atomic(using=database):
            saved = record()
            task_enqueued.send(sender=type(backend), task_result=result)
            push()
            saved.refresh_from_db()
        return build_result(saved, task)
    if get_store().transactional_push:
        # The job and its result commit (or roll back) together.
        with transaction.atomic(using=database):
            pushed = push()
            if pushed.status == "duplicate":
                return waiting_result(backend.alias, key) or result
            record(pushed.id)
    elif key is None and transaction.get_connection(database).in_atomic_block:
        # The store cannot join the transaction (Redis): the push goes to its
        # outbox in this transaction, with the result, and moves at the commit, or
        # at a worker's sweep if the store is down then. (A unique task needs the
        # store's answer at once: it is pushed at the commit, below.)
        with transaction.atomic(using=database):
            record()
            push()
    else:
        # The result first, so the worker finds it; the job once it is committed.
        saved = record()

        def push_now() -> Pushed:
            try:
                pushed = push()
            except PushNotReplicated as e:
                # Queued all the same (on the primary, not confirmed by a replica): the
                # task runs, so its result stays, and the error goes on as a push's does.
                settled(Pushed("queued", e.ids[0]) if e.ids[0] else Pushed("duplicate"))
                raise
            except BaseException:
                saved.delete()
                raise
            return settled(pushed)

        def settled(pushed: Pushed) -> Pushed:
            """Drop the result of a duplicate; give the result of a queued job its id."""
            if pushed.status == "duplicate":
                saved.delete()
            elif pushed.id is not None:
                type(saved).objects.using(database).filter(pk=saved.pk).update(
                    job_id=str(pushed.id)
                )
            return pushed

        if transaction.get_connection(database).in_atomic_block:
            transaction.on_commit(push_now, using=database)
        elif push_now().status == "duplicate":
            return waiting_result(backend.alias, key) or result
    task_enqueued.send(sender=type(backend), task_result=result)
    return result

def waiting_result(alias: str, key: str | None) -> TaskResult | None:
    """The newest result of `alias` with unique key `key` still waiting to run, or None."""
    found = (
        records()
        .filter(backend=alias, unique_key=key, status=TaskResultStatus.READY)
        .order_by("-enqueued_at")
        .first()
    )
    return None if found is None else build_result(found)
