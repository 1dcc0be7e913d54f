"""laterite_django.testing.capture_jobs: pushes recorded, not stored or run, on every store
and in every mode."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from laterite_django import Pushed
from laterite_django.stores import get_store
from laterite_django.testing import CapturedPush, capture_jobs
from tests.testapp import jobs
from tests.testapp.models import Record


def test_every_push_form_is_recorded_and_nothing_stored(store):
    at = timezone.now() + timedelta(days=2)
    before = timezone.now()
    with capture_jobs() as pushed:
        results = [
            jobs.record.push("a"),
            jobs.add.push(1, b=2),
            jobs.record.push_in(timedelta(minutes=5), value="in"),
            jobs.record.push_in(30, "in seconds"),
            jobs.record.push_at(at, "at"),
            *jobs.mail.push_many([("m1",), {"value": "m2"}]),
            jobs.record.enqueue(("elsewhere",), {}, queue="low", priority=5),
        ]
    after = timezone.now()

    assert results == [Pushed("queued", None)] * 8
    assert [(p.name, p.args, p.kwargs, p.queue) for p in pushed] == [
        ("tests.record", ("a",), {}, "default"),
        ("tests.add", (1,), {"b": 2}, "default"),
        ("tests.record", (), {"value": "in"}, "default"),
        ("tests.record", ("in seconds",), {}, "default"),
        ("tests.record", ("at",), {}, "default"),
        ("tests.mail", ("m1",), {}, "mail"),
        ("tests.mail", (), {"value": "m2"}, "mail"),
        ("tests.record", ("elsewhere",), {}, "low"),
    ]
    assert before <= pushed[0].at <= after
    assert before + timedelta(minutes=5) <= pushed[2].at <= after + timedelta(minutes=5)
    assert before + timedelta(seconds=30) <= pushed[3].at <= after + timedelta(seconds=30)
    assert pushed[4].at == at
    assert pushed[7].priority == 5 and pushed[0].job is jobs.record
    assert get_store().counts() == {}


def test_async_push_forms_are_recorded(store):
    at = timezone.now() + timedelta(hours=1)

    async def push_all() -> list[Pushed]:
        return [
            await jobs.record.apush("a"),
            await jobs.record.apush_in(60, "in"),
            await jobs.record.apush_at(at, "at"),
            *await jobs.mail.apush_many([("m",)]),
        ]

    with capture_jobs() as pushed:
        results = async_to_sync(push_all)()

    assert results == [Pushed("queued", None)] * 4
    assert [(p.name, p.args) for p in pushed] == [
        ("tests.record", ("a",)), ("tests.record", ("in",)), ("tests.record", ("at",)),
        ("tests.mail", ("m",)),
    ]
    assert pushed[2].at == at
    assert get_store().counts() == {}


@override_settings(LATERITE_QUEUE_MODE="inline")
def test_inline_mode_does_not_run_captured_pushes(db):
    with capture_jobs() as pushed:
        assert jobs.record.push("not run") == Pushed("queued", None)
        async_to_sync(jobs.async_record.apush)("not run either")
    assert [p.name for p in pushed] == ["tests.record", "tests.async_record"]
    assert not Record.objects.exists()
    assert jobs.record.push("runs").status == "ran"  # the capture is over


@override_settings(LATERITE_QUEUE_MODE="worker")
def test_worker_mode_starts_no_threads_for_a_captured_push(db):
    from laterite_django.worker import threads

    assert not threads.running_here()
    with capture_jobs() as pushed:
        jobs.record.push("x")
    assert len(pushed) == 1
    assert not threads.running_here()


def test_arguments_are_what_the_job_receives_and_are_still_checked(db):
    with capture_jobs() as pushed:
        jobs.record.push(value=("a", "tuple"))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="unexpected 'nope'"):
            jobs.record.push("v", nope=1)  # type: ignore[call-arg]
        with pytest.raises(ValueError, match="aware datetime"):
            jobs.record.push_at(timezone.now().replace(tzinfo=None), "naive")
    assert len(pushed) == 1
    assert pushed[0].kwargs == {"value": ["a", "tuple"]}  # after the JSON round trip


def test_unique_keys_are_recorded_not_applied(db):
    with capture_jobs() as pushed:
        assert jobs.unique.push(7).status == "queued"
        assert jobs.unique.push(7).status == "queued"
    assert [p.unique_key for p in pushed] == ["user:7", "user:7"]


def test_nested_captures_each_see_their_own_block(store):
    with capture_jobs() as outer:
        jobs.record.push("1")
        with capture_jobs() as inner:
            jobs.record.push("2")
        jobs.record.push("3")
    assert [p.args for p in outer] == [("1",), ("2",), ("3",)]
    assert [p.args for p in inner] == [("2",)]
    assert get_store().counts() == {}


def test_only_the_current_thread_is_captured(store):
    done = threading.Event()

    def other() -> None:
        try:
            jobs.record.push("from another thread")
            done.set()
        finally:
            connections.close_all()  # this thread's own connection

    with capture_jobs() as pushed:
        jobs.record.push("here")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(30)
    assert done.is_set()
    assert [p.args for p in pushed] == [("here",)]
    assert get_store().counts()["default"].waiting == 1
    jobs.record.push("after")
    assert get_store().counts()["default"].waiting == 2


def test_captured_push_is_a_plain_record():
    at = timezone.now()
    one = CapturedPush(name="n", args=(1,), kwargs={}, queue="q", at=at)
    assert one == CapturedPush(name="n", args=(1,), kwargs={}, queue="q", at=at)
    assert "n" in repr(one)
