"""apush, apush_in, apush_at, apush_many from async code, on every store; a plain push on
the event loop is refused."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from laterite_django import JobContext, Pushed, PushFromEventLoop, job, registry
from laterite_django.stores import get_store
from tests.testapp import jobs
from tests.testapp.models import Record


def loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_async_pushes_are_stored_and_run_by_a_worker(workers, store):
    at = timezone.now() + timedelta(hours=2)

    async def push_all() -> list[Pushed]:
        return [
            await jobs.record.apush("a"),
            await jobs.async_record.apush(value="b"),
            await jobs.record.apush_in(timedelta(hours=1), "in an hour"),
            await jobs.record.apush_in(3600, "in 3600 s"),
            await jobs.record.apush_at(at, "at"),
            *await jobs.record.apush_many([("m1",), {"value": "m2"}]),
            await jobs.unique.apush(7),
            await jobs.unique.apush(7),
        ]

    pushed = async_to_sync(push_all)()

    assert [p.status for p in pushed] == ["queued"] * 8 + ["duplicate"]
    assert all(p.id is not None for p in pushed[:8])
    counts = store.counts()["default"]
    assert (counts.waiting, counts.delayed) == (5, 3)

    done = workers.run("--stop-when-empty")

    assert done.returncode == 0, done.stderr
    ran = sorted(Record.objects.values_list("kind", "value"))
    assert ran == [("async", "b"), ("record", "a"), ("record", "m1"), ("record", "m2"),
                   ("unique", "7")]
    assert store.counts()["default"].delayed == 3


def test_the_store_is_never_called_on_the_event_loop(store, monkeypatch):
    calls: list[bool] = []
    real_push = store.push

    def spy(new_jobs):
        calls.append(loop_running_here())
        return real_push(new_jobs)

    monkeypatch.setattr(store, "push", spy)

    async def push() -> None:
        await jobs.record.apush("x")
        await jobs.record.apush_many([("y",), ("z",)])

    async_to_sync(push)()

    assert calls == [False, False]
    assert store.counts()["default"].waiting == 3


@pytest.mark.parametrize("mode", ["external", "inline", "worker"])
def test_a_plain_push_on_the_event_loop_names_apush(mode, db):
    at = timezone.now() + timedelta(hours=1)
    attempts = {
        "push": lambda: jobs.record.push("x"),
        "push_in": lambda: jobs.record.push_in(5, "x"),
        "push_at": lambda: jobs.record.push_at(at, "x"),
        "push_many": lambda: jobs.record.push_many([("x",)]),
        "enqueue": lambda: jobs.record.enqueue(("x",), {}),
    }

    async def try_each() -> dict[str, BaseException | None]:
        errors: dict[str, BaseException | None] = {}
        for name, attempt in attempts.items():
            try:
                attempt()
            except Exception as e:
                errors[name] = e
            else:
                errors[name] = None
        return errors

    with override_settings(LATERITE_QUEUE_MODE=mode):
        errors = async_to_sync(try_each)()

    for name, error in errors.items():
        assert isinstance(error, PushFromEventLoop), (name, error)
        assert "await job.apush(...)" in str(error) and "'tests.record'" in str(error)
        assert isinstance(error, SynchronousOnlyOperation) and isinstance(error, RuntimeError)
    assert not Record.objects.exists()
    assert get_store().counts() == {}


def test_django_allow_async_unsafe_lets_a_plain_push_through(store, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    async def push() -> Pushed:
        try:
            return jobs.record.push("unsafe, as asked")
        finally:
            connections.close_all()  # the loop thread's own connection

    assert async_to_sync(push)().status == "queued"
    assert store.counts()["default"].waiting == 1


def test_a_push_in_sync_code_called_from_async_code_is_fine(store):
    from asgiref.sync import sync_to_async

    async def view() -> Pushed:
        return await sync_to_async(jobs.record.push)("from a sync helper")

    assert async_to_sync(view)().status == "queued"


@pytest.fixture
def scratch_jobs():
    names: list[str] = []
    yield names
    for name in names:
        registry.unregister(name)


@override_settings(LATERITE_QUEUE_MODE="inline")
def test_inline_apush_runs_the_job(transactional_db, scratch_jobs):
    where: dict[str, object] = {}

    @job("async_push.inline_async")
    async def inline_async(n: int, cx: JobContext) -> int:
        where["async"] = (threading.get_ident(), loop_running_here(), cx.attempt, cx.id)
        await Record.objects.acreate(kind="inline-async", value=str(n))
        return n * 2

    @job("async_push.inline_sync")
    def inline_sync(n: int) -> int:
        where["sync"] = (threading.get_ident(), loop_running_here())
        Record.objects.create(kind="inline-sync", value=str(n))
        return n + 1

    @job("async_push.inline_broken")
    async def inline_broken() -> None:
        raise ValueError("inline failure")

    scratch_jobs += [inline_async.name, inline_sync.name, inline_broken.name]

    async def push() -> tuple[list[Pushed], int]:
        ran = [await inline_async.apush(3), await inline_sync.apush(4),
               *await inline_sync.apush_many([(5,)]), await inline_async.apush_in(3600, 6)]
        return ran, threading.get_ident()

    ran, loop_thread = async_to_sync(push)()

    assert ran == [Pushed("ran", None, 6), Pushed("ran", None, 5), Pushed("ran", None, 6),
                   Pushed("ran", None, 12)]
    assert where["async"] == (loop_thread, True, 1, None)  # awaited on the loop itself
    sync_thread, sync_loop = where["sync"]  # type: ignore[misc]
    assert sync_thread != loop_thread and not sync_loop  # off the loop (sync_to_async)
    assert sorted(Record.objects.values_list("kind", "value")) == [
        ("inline-async", "3"), ("inline-async", "6"), ("inline-sync", "4"), ("inline-sync", "5")]
    with pytest.raises(ValueError, match="inline failure"):
        async_to_sync(inline_broken.apush)()


def test_apush_checks_its_arguments_on_the_spot(db):
    async def bad() -> None:
        await jobs.record.apush("v", nope=1)  # type: ignore[call-arg]

    with pytest.raises(TypeError, match="unexpected 'nope'"):
        async_to_sync(bad)()

    async def naive() -> None:
        await jobs.record.apush_at(timezone.now().replace(tzinfo=None), "v")

    with pytest.raises(ValueError, match="aware datetime"):
        async_to_sync(naive)()
    assert get_store().counts() == {}
